#!/bin/sh
# check_exports.sh NM LIBRARY: fails unless every dynamic symbol LIBRARY
# defines is a public name: it starts with fprep_ and not with fprep__.
set -u
nm=$1
lib=$2
syms=$("$nm" -D --defined-only "$lib" | awk 'NF == 3 { print $3 }') || exit 1
if [ -z "$syms" ]; then
	echo "$lib exports nothing"
	exit 1
fi
bad=$(printf '%s\n' "$syms" | grep -v '^fprep_[a-z]')
if [ -n "$bad" ]; then
	echo "$lib exports names that are not public fprep_ functions:"
	printf '%s\n' "$bad"
	exit 1
fi
echo "$lib exports $(printf '%s\n' "$syms" | wc -l) public fprep_ symbols"
