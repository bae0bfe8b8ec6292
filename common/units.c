/* SPDX-License-Identifier: MIT */
/* Amounts of bytes as the tools print them: see units.h. */
#include <stdio.h>

#include "units.h"

void ta_iec_bytes(uint64_t v, char *buf, size_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double d = (double)v;
	unsigned u = 0;
	while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": one unit up instead. */
	if (u > 0 && d >= 1023.95 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, n, "%.1f %s", d, units[u]);
}
