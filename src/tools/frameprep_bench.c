/* frameprep_bench.c: placeholder, replaced by its implementation. */
int main(void)
{
	return 1;
}
