/* SPDX-License-Identifier: MIT */
/*
 * Heap misuse that the C library's allocator stops, one case per run (tests/integration/
 * test_misuse.sh starts it under the preload): a double free of a small and of a packed object,
 * realloc of a freed object, free and realloc of a pointer inside an object, an overflow that
 * forges the next object's header, and a write into a freed object's free-list link. Each case
 * prints "ptr=<address>" (the pointer the allocator should name), then misuses it, then checks what
 * the allocator does next: no object handed out twice, none inside a live one, no neighbour
 * overwritten. Under the default TIERALLOC_ON_MISUSE=abort the misuse ends the program with SIGABRT
 * before that; under TIERALLOC_ON_MISUSE=warn it goes on, and the checks must hold ("ok", status
 * 0). A check that fails prints "handed out twice" or the like and exits 3.
 *
 * Unlike the other prog_*.c it is written against tieralloc's layout (packed objects and their
 * 8-byte header, a young process packing its 129 B-16 KiB objects) and is not meant to pass
 * under the C library's allocator, which aborts in each case.
 */
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "prog.h"

#define NHOLD 512

/* The compiler sees through none of the misuse below (it would warn, or optimise it away). */
static void *opaque(void *p)
{
	__asm__ volatile("" : "+r"(p));
	return p;
}

static void show(void *p)
{
	printf("ptr=%p\n", p);
	fflush(stdout);
}

static void bad(const char *what, void *p)
{
	printf("%s: %p\n", what, p);
	fflush(stdout);
	exit(3);
}

/* Whether [p, p+n) and [q, q+m) share a byte. */
static bool overlap(const void *p, size_t n, const void *q, size_t m)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
	return a < b + m && b < a + n;
}

/* Allocate count objects of each size from lo to hi (step 8) and keep them: none may be handed
 * out twice, nor overlap [live, live+live_size) (0: no such object). */
static void take_many(size_t lo, size_t hi, unsigned count, const void *live, size_t live_size)
{
	static void *held[NHOLD];
	static size_t size[NHOLD];
	unsigned n = 0;
	for (size_t s = lo; s <= hi; s += 8) {
		for (unsigned i = 0; i < count && n < NHOLD; i++) {
			void *p = malloc(s);
			REQUIRE(p != NULL, "malloc(%zu)", s);
			if (live_size != 0 && overlap(p, s, live, live_size))
				bad("inside a live object", p);
			for (unsigned j = 0; j < n; j++)
				if (overlap(p, s, held[j], size[j]))
					bad("handed out twice", p);
			held[n] = p;
			size[n++] = s;
		}
	}
}

static void double_free(size_t n)
{
	void *keep = malloc(n); /* the object's run or area is not given back meanwhile */
	void *p = malloc(n);
	REQUIRE(keep != NULL && p != NULL, "malloc(%zu)", n);
	show(p);
	void *again = opaque(p);
	free(p);
	free(again);
	/* The sizes whose bin p may be in (a packed object serves a class below its size). */
	take_many(n > 64 ? n - 64 : 8, n + 8, 4, NULL, 0);
}

/* realloc of a freed object, within its size: an allocator that takes it for a live one returns
 * it as it is, while it also waits in a cache for the next malloc. */
static void realloc_freed(void)
{
	void *keep = malloc(32), *p = malloc(32);
	REQUIRE(keep != NULL && p != NULL, "malloc(32)");
	show(p);
	void *again = opaque(p);
	free(p);
	void *q = realloc(again, 24);
	take_many(24, 32, 4, q != NULL ? q : keep, 24);
}

static void interior(bool by_realloc)
{
	unsigned char *p = malloc(64);
	REQUIRE(p != NULL, "malloc(64)");
	memset(p, 0x5a, 64);
	show(p + 16);
	if (by_realloc) {
		/* Within the object's size: an allocator that takes it for an object's start
		 * returns it as it is, an object inside a live one. */
		void *q = realloc(opaque(p + 16), 40);
		if (q == p + 16)
			bad("realloc kept a pointer inside a live object", q);
	} else {
		free(opaque(p + 16));
	}
	take_many(40, 72, 4, p, 64);
	for (unsigned i = 0; i < 64; i++)
		if (p[i] != 0x5a)
			bad("live object overwritten", p + i);
}

/* Two packed neighbours a, b and b's own neighbour c; an 8-byte overflow of a writes over b's
 * header the header of a real 3968-byte object, as a careless copy would. */
enum forge_use { FORGE_FREE, FORGE_REALLOC, FORGE_USABLE };
static void forged_header(enum forge_use use)
{
	char *a = NULL, *b = NULL, *c = NULL;
	for (unsigned tries = 0; tries < 8; tries++) {
		a = malloc(200);
		b = malloc(200);
		c = malloc(200);
		REQUIRE(a != NULL && b != NULL && c != NULL, "malloc(200)");
		size_t ua = malloc_usable_size(a);
		if (b == a + ua + 8 && c == b + malloc_usable_size(b) + 8)
			break;
		b = NULL; /* not neighbours (a run's end): try the next three */
	}
	REQUIRE(b != NULL, "no three adjacent packed 200-byte objects (is the preload packing?)");
	char *big = malloc(3968);
	REQUIRE(big != NULL, "malloc(3968)");
	size_t ub = malloc_usable_size(b);
	memset(c, 0x33, 200);
	show(b);
	memcpy(a + malloc_usable_size(a), (char *)opaque(big) - 8, 8); /* the overflow */
	switch (use) {
	case FORGE_FREE:
		free(b);
		take_many(3968, 3968, 8, c, 200);
		break;
	case FORGE_REALLOC: {
		char *q = realloc(b, 3000);
		if (q == b)
			bad("realloc grew in place over a neighbour", q);
		break;
	}
	case FORGE_USABLE: {
		size_t u = malloc_usable_size(b);
		if (u > ub)
			bad("malloc_usable_size past the object", b);
		break;
	}
	}
	for (unsigned i = 0; i < 200; i++)
		if ((unsigned char)c[i] != 0x33)
			bad("neighbour overwritten", c + i);
}

/* Freed objects on a central free list (their run keeps live objects, so it stays), then each
 * one's first word overwritten with a live object's address, as a use after free would. */
static void free_link(size_t n)
{
	enum { N = 96 };
	void *v[N], *live = malloc(n);
	REQUIRE(live != NULL, "malloc(%zu)", n);
	for (unsigned i = 0; i < N; i++) {
		v[i] = malloc(n);
		REQUIRE(v[i] != NULL, "malloc(%zu)", n);
	}
	for (unsigned i = 0; i < N; i += 2)
		free(v[i]);
	malloc_trim(0); /* this thread's cache back to the runs and lists */
	for (unsigned i = 0; i < N; i += 2)
		show(v[i]);
	for (unsigned i = 0; i < N; i += 2)
		memcpy(v[i], &live, sizeof(live));
	take_many(n, n, 2 * N, live, n);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	prog_expect_preload();
	if (strcmp(c, "double-free-small") == 0)
		double_free(32);
	else if (strcmp(c, "double-free-packed") == 0)
		double_free(200);
	else if (strcmp(c, "realloc-freed") == 0)
		realloc_freed();
	else if (strcmp(c, "interior-free") == 0)
		interior(false);
	else if (strcmp(c, "interior-realloc") == 0)
		interior(true);
	else if (strcmp(c, "header-free") == 0)
		forged_header(FORGE_FREE);
	else if (strcmp(c, "header-realloc") == 0)
		forged_header(FORGE_REALLOC);
	else if (strcmp(c, "header-usable") == 0)
		forged_header(FORGE_USABLE);
	else if (strcmp(c, "link-run") == 0)
		free_link(32);
	else if (strcmp(c, "link-packed") == 0)
		free_link(3968);
	else {
		fprintf(stderr, "usage: prog_misuse CASE\n");
		return 99;
	}
	printf("ok\n");
	return prog_result("prog_misuse");
}
