/*
 * test_tool_options.c: the preprocessing options that the CLI and the
 * bench share (src/tools/tool_options.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "tool_options.h"

/* Every option name in TOOL_PREPROCESS_OPTIONS reaches the parser with its
 * own value, and each good value lands in the request. */
static void test_apply(void **state)
{
	static const struct option opts[] = {TOOL_PREPROCESS_OPTIONS,
	                                     {NULL, 0, NULL, 0}};
	static const char *const args[][2] = {
	        {"size", "320x256"},   {"dtype", "f16"},
	        {"layout", "nhwc"},    {"order", "bgr"},
	        {"resize", "stretch"}, {"mean", "0.5"},
	        {"std", "1,2,3"},      {"scale", "1"},
	        {"pad", "0"},          {"matrix", "bt709"},
	        {"range", "full"},     {"rounding", "opencv"},
	};
	struct tool_preprocess p = {0};
	fprep_request req, def;

	(void)state;
	assert_int_equal(sizeof(opts) / sizeof(opts[0]) - 1,
	                 sizeof(args) / sizeof(args[0]));
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		int val = -1;
		for (const struct option *o = opts; o->name != NULL; o++)
			if (strcmp(o->name, args[i][0]) == 0)
				val = o->val;
		assert_int_not_equal(val, -1);
		assert_int_equal(tool_preprocess_option(&p, val, args[i][1]),
		                 0);
	}
	fprep_request_init(&req, FPREP_PIX_BGR8, 100, 50);
	def = req;
	tool_preprocess_apply(&p, &req);
	assert_int_equal(req.out_width, 320);
	assert_int_equal(req.out_height, 256);
	assert_int_equal(req.dtype, FPREP_DTYPE_F16);
	assert_int_equal(req.layout, FPREP_LAYOUT_NHWC);
	assert_int_equal(req.channel_order, FPREP_ORDER_BGR);
	assert_int_equal(req.resize, FPREP_RESIZE_STRETCH);
	assert_true(req.mean[0] == 0.5f && req.mean[2] == 0.5f);
	assert_true(req.std[0] == 1 && req.std[1] == 2 && req.std[2] == 3);
	assert_true(req.scale == 1 && req.pad_value == 0);
	assert_int_equal(req.yuv_matrix, FPREP_MATRIX_BT709);
	assert_int_equal(req.yuv_range, FPREP_RANGE_FULL);
	assert_int_equal(req.rounding, FPREP_ROUNDING_OPENCV);
	/* Nothing given: the request keeps its defaults. */
	memset(&p, 0, sizeof(p));
	req = def;
	tool_preprocess_apply(&p, &req);
	assert_memory_equal(&req, &def, sizeof(req));
}

static void test_refusals(void **state)
{
	static const struct {
		int opt;
		const char *arg;
	} bad[] = {
	        {TOOL_OPT_SIZE, "0x10"},    {TOOL_OPT_SIZE, "640"},
	        {TOOL_OPT_SIZE, "70000x1"}, {TOOL_OPT_DTYPE, "f64"},
	        {TOOL_OPT_LAYOUT, "chw"},   {TOOL_OPT_ORDER, ""},
	        {TOOL_OPT_RESIZE, "crop"},  {TOOL_OPT_MEAN, "1,2"},
	        {TOOL_OPT_MEAN, "nan"},     {TOOL_OPT_STD, "0"},
	        {TOOL_OPT_STD, "1,-1,1"},   {TOOL_OPT_SCALE, "inf"},
	        {TOOL_OPT_SCALE, "1x"},     {TOOL_OPT_PAD, "256"},
	        {TOOL_OPT_PAD, "-1"},       {TOOL_OPT_MATRIX, "bt2021"},
	        {TOOL_OPT_RANGE, "tv"},     {TOOL_OPT_ROUNDING, "nearest"},
	        {TOOL_OPT_ROUNDING, ""},
	};
	struct tool_preprocess p = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		        tool_preprocess_option(&p, bad[i].opt, bad[i].arg), -1);
	assert_int_equal(p.set, 0);
	/* Not one of the shared options. */
	assert_int_equal(tool_preprocess_option(&p, 'o', "x"), 1);
	assert_int_equal(tool_preprocess_option(&p, TOOL_OPT_END, "x"), 1);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_refusals),
})
