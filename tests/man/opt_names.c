/* SPDX-License-Identifier: MIT */
/*
 * The names of the TIERALLOC_* variables of the option table (src/base/env.c), one a line, as
 * the parser knows them: tests/man/test_man_vars.sh compares them with tieralloc(7).
 */
#include <stdio.h>

#include "base/base.h"

int main(void)
{
	for (unsigned i = 0; i < ta_opt_count; i++)
		printf("TIERALLOC_%s\n", ta_opt_table[i].name);
	return 0;
}
