#!/bin/bash
# SPDX-License-Identifier: MIT
#
# perl under the preload: hashes of 100,000 keys, regular expressions with captures, sorts of
# 100,000 strings and numbers, string repetition and splitting, nested data structures that are
# built and dropped (perl frees through free(), reallocs its strings and arrays).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

ta_require perl perl

cat >"$TA_WORK/work.pl" <<'EOF'
use strict;
use warnings;

my $seed = 42;
sub rnd { $seed = ($seed * 1103515245 + 12345) % 2147483648; return $seed; }

my %h;
my @words;
for my $i (1 .. 100_000) {
	my $w = join '', map { chr(97 + rnd() % 26) } 1 .. (3 + $i % 9);
	push @words, $w;
	$h{$w} += $i;
}
printf "keys %d\n", scalar keys %h;

my @sorted = sort { $h{$b} <=> $h{$a} || $a cmp $b } keys %h;
print "top @sorted[0 .. 4]\n";
my @nums = sort { $a <=> $b } map { rnd() % 1_000_000 } 1 .. 100_000;
print "nums $nums[0] $nums[50_000] $nums[-1]\n";

my ($vowels, $pairs) = (0, 0);
for my $w (@words) {
	$vowels++ while $w =~ /[aeiou]/g;
	$pairs++ if $w =~ /(\w)\1/;
}
print "vowels $vowels pairs $pairs\n";

my $text = join ' ', @words[0 .. 19_999];
(my $t2 = $text) =~ s/(\w+)/\U$1/g;
my @caps = ($t2 =~ /\b([A-Z]{5})\b/g);
print "caps ", scalar(@caps), " len ", length($t2), "\n";

my %tree;
for my $i (1 .. 50_000) {
	my $w = $words[$i];
	push @{ $tree{ substr($w, 0, 1) }{ length $w } }, [$i, $w x 3];
}
my $n = 0;
for my $k (sort keys %tree) {
	for my $l (sort { $a <=> $b } keys %{ $tree{$k} }) {
		$n += @{ $tree{$k}{$l} };
	}
}
%tree = ();
print "tree $n\n";

my $s = '';
$s .= sprintf("%05d,", $_) for 1 .. 100_000;
my @parts = split /,/, $s;
print "parts ", scalar(@parts), " ", length($s), "\n";
my %count;
$count{ length $_ }++ for @words;
print join(' ', map { "$_:$count{$_}" } sort { $a <=> $b } keys %count), "\n";
EOF

work()
{
	perl "$TA_WORK/work.pl"
}
compare_runs perl work
