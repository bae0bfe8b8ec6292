#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The compilers under the preload: gcc (cc1, as, collect2, ld: several allocation-heavy programs
# in a pipeline) compiles and links a small C file, g++ a small C++ one; the results run without
# the preload and must print the same as the programs the compilers built without it. The object
# files must even be byte-identical: the compilers are deterministic for the same input and path.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require gcc gcc
ta_require g++ g++

cat >"$TA_WORK/sort.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec {
	char key[16];
	unsigned value;
};

static int by_key(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c != 0 ? c : (x->value > y->value) - (x->value < y->value);
}

int main(void)
{
	enum { N = 50000 };
	struct rec *r = malloc(N * sizeof(*r));
	unsigned seed = 12345, sum = 0;
	if (r == NULL)
		return 1;
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(r[i].key, sizeof(r[i].key), "k%07u", (seed >> 8) % 100000);
		r[i].value = seed;
	}
	qsort(r, N, sizeof(*r), by_key);
	for (int i = 0; i < N; i++)
		sum = sum * 31u + (unsigned char)r[i].key[3] + r[i].value;
	printf("first %s last %s sum %u\n", r[0].key, r[N - 1].key, sum);
	free(r);
	return 0;
}
EOF

cat >"$TA_WORK/words.cc" <<'EOF'
#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

int main()
{
	std::map<std::string, int> freq;
	std::ostringstream text;
	for (int i = 0; i < 20000; i++)
		text << "w" << (i * 7919) % 1000 << (i % 3 ? " " : "\n");
	std::istringstream in(text.str());
	std::string w;
	while (in >> w)
		freq[w]++;
	std::vector<std::pair<int, std::string>> v;
	for (const auto &kv : freq)
		v.emplace_back(kv.second, kv.first);
	std::sort(v.rbegin(), v.rend());
	std::cout << freq.size() << " " << v.front().second << " " << v.back().second << "\n";
	return 0;
}
EOF

work()
{
	cp "$TA_WORK/sort.c" "$TA_WORK/words.cc" .
	gcc -O2 -Wall -c sort.c -o sort.o
	gcc -O2 -o sort sort.o
	gcc -O0 -g -o sort-debug sort.c
	g++ -O2 -std=c++17 -c words.cc -o words.o
	g++ -O2 -o words words.o
	sha1sum sort.o words.o sort words
	# Run the results without the preload: what is under test is the compiler.
	env -u LD_PRELOAD ./sort
	env -u LD_PRELOAD ./sort-debug
	env -u LD_PRELOAD ./words
}
compare_runs gcc work
