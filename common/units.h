/* SPDX-License-Identifier: MIT */
/*
 * The one way tieralloc's tools print an amount of bytes (tieralloc-stat, tieralloc-run's
 * summary): IEC units with one decimal, "512 B", "8.0 MiB", "1.5 GiB", so that the same
 * amount reads the same in both.
 */
#ifndef TA_UNITS_H
#define TA_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* At most 10 characters ("1023.9 PiB"); n should be at least 16. */
void ta_iec_bytes(uint64_t v, char *buf, size_t n);

#endif /* TA_UNITS_H */
