# The manual pages (man/): they render without warnings (test_man_render.sh), and tieralloc(7)
# documents exactly the TIERALLOC_* variables the code reads (test_man_vars.sh, with opt_names,
# which prints the option table as compiled).
EXTRA_DIST += tests/man/test_man_render.sh tests/man/test_man_vars.sh
check_PROGRAMS += tests/man/opt_names
tests_man_opt_names_SOURCES = tests/man/opt_names.c
# The option table as the readers build it (src/base/env.c, without the core's constructor).
tests_man_opt_names_LDADD = src/libtareader.la
TESTS += tests/man/test_man_render.sh tests/man/test_man_vars.sh
