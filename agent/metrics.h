/* SPDX-License-Identifier: MIT */
/*
 * The agent's metrics (metrics.c): the HTTP responder of --metrics, run from the agent's own
 * loop, and the writer of --textfile.
 */
#ifndef TA_AGENT_METRICS_H
#define TA_AGENT_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- metrics.c ---- */
/* Writes the metrics' text to f: 0, or -1 when it could not (nothing is served then). */
typedef int ta_metrics_body(void *ctx, FILE *f);
struct pollfd;
struct ta_metrics_server;
/* Listen at "[ADDRESS:]PORT" (a numeric IPv4 address, or IPv6 in brackets; 127.0.0.1 when only a
 * port is given; port 0: any free one), a loopback address unless any. -1 with a line in err. */
int ta_metrics_listen(const char *spec, bool any, struct ta_metrics_server **out, char *err,
		      size_t errlen);
/* Whether ta_metrics_listen would take the address (it may still fail to bind): 0, or -1 with a
 * line in err. */
int ta_metrics_check(const char *spec, bool any, char *err, size_t errlen);
/* "ADDRESS:PORT" as bound. */
const char *ta_metrics_address(const struct ta_metrics_server *srv);
/* The descriptors to poll (the listening socket first, then the connections): at most max. */
unsigned ta_metrics_pollfds(struct ta_metrics_server *srv, struct pollfd *fds, unsigned max);
/* Milliseconds until a connection's deadline, -1 without connections. */
int ta_metrics_timeout_ms(const struct ta_metrics_server *srv, uint64_t now_ms);
/* Act on what poll() returned for the descriptors of the last ta_metrics_pollfds (n of them):
 * read, answer, accept, drop connections past their deadline. Never blocks. */
void ta_metrics_serve(struct ta_metrics_server *srv, const struct pollfd *fds, unsigned n,
		      uint64_t now_ms, ta_metrics_body *body, void *ctx);
void ta_metrics_free(struct ta_metrics_server *srv);
/* Write the text to PATH.tmp and rename it to PATH: readers see the old or the new file whole,
 * mode 0644 whatever the umask. 0, or -1 with errno. */
int ta_metrics_textfile(const char *path, ta_metrics_body *body, void *ctx);

#endif
