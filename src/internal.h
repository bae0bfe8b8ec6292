/* SPDX-License-Identifier: MIT */
/*
 * Every layer's declarations at once, for the unit tests and the preload library's entry points.
 * The core's own files include their layer's header (base/base.h, quota/quota.h, alloc/alloc.h,
 * enforce/enforce.h, api/api.h) and those of the layers below, never this.
 */
#ifndef TA_INTERNAL_H
#define TA_INTERNAL_H

#include "alloc/alloc.h"
#include "api/api.h"
#include "base/base.h"
#include "enforce/enforce.h"
#include "quota/charge.h"
#include "quota/quota.h"

#endif /* TA_INTERNAL_H */
