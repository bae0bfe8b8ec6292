# The manual pages (man/): they render without warnings (test_man_render.sh), and tieralloc(7)
# documents exactly the TIERALLOC_* variables the code reads (test_man_vars.sh, with opt_names,
# which prints the option table as compiled).
EXTRA_DIST += tests/man/test_man_render.sh tests/man/test_man_vars.sh
check_PROGRAMS += tests/man/opt_names
tests_man_opt_names_SOURCES = tests/man/opt_names.c src/base/env.c src/base/log.c
TESTS += tests/man/test_man_render.sh tests/man/test_man_vars.sh
