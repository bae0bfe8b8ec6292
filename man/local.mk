# Manual pages, written in roff here (not generated): installed by make install under
# $(mandir)/man1, man3, man7 and man8. tests/man/ checks that they render without warnings and
# that tieralloc(7) documents every TIERALLOC_* variable the code reads.
dist_man_MANS = man/tieralloc.3 man/tieralloc.7 man/tieralloc-run.1 man/tieralloc-stat.1 \
	man/tieralloc-plot.1
# tierallocd(8) is installed with the agent (HAVE_BPF), and distributed always.
EXTRA_DIST += man/tierallocd.8
if HAVE_BPF
man_MANS = man/tierallocd.8
endif
