/* SPDX-License-Identifier: MIT */
/*
 * The agent's metrics (tierallocd --metrics, --textfile): a minimal HTTP/1.0 responder run from
 * the agent's own loop, and the textfile for node-exporter. The text itself is the caller's
 * (snapshot.c formats the segments with common/prom.c).
 *
 * The responder never blocks the loop: the listening socket and every connection are
 * non-blocking and polled with the agent's other descriptors; a request is read up to the end of
 * its headers (at most REQUEST_MAX bytes), answered in full (GET /metrics: 200 and the text,
 * anything else: 404, an oversized request: 400), and the connection closed. At most MAX_CLIENTS
 * connections are served at once (others are closed when accepted), and each has CLIENT_MS from
 * its accept to be done: a client that sends nothing or reads slowly only loses its answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "metrics.h"

#define REQUEST_MAX 4096
#define MAX_CLIENTS 16
#define CLIENT_MS   5000

struct client {
	int fd; /* -1: free */
	uint64_t deadline_ms;
	size_t inlen;
	char in[REQUEST_MAX];
	char *out; /* the whole response, once the request was read */
	size_t outlen, outpos;
};

struct ta_metrics_server {
	int listen_fd;
	char address[INET6_ADDRSTRLEN + 16];
	struct client clients[MAX_CLIENTS];
	/* The clients of the last ta_metrics_pollfds, in the order of their pollfds. */
	unsigned polled[MAX_CLIENTS], npolled;
	bool listen_polled;
};

static bool loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

/* "[ADDR:]PORT" into a numeric host and port: ADDR an IPv4 address or a bracketed IPv6 one. */
static bool split(const char *spec, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(spec, ':');
	const char *p = colon != NULL ? colon + 1 : spec;
	if (*p == '\0' || strlen(p) >= plen || strspn(p, "0123456789") != strlen(p))
		return false;
	snprintf(port, plen, "%s", p);
	if (colon == NULL) {
		snprintf(host, hlen, "127.0.0.1");
		return true;
	}
	const char *h = spec;
	size_t len = (size_t)(colon - spec);
	if (len >= 2 && h[0] == '[' && h[len - 1] == ']')
		h++, len -= 2;
	else if (memchr(h, ':', len) != NULL) /* IPv6 without brackets */
		return false;
	if (len == 0 || len >= hlen)
		return false;
	memcpy(host, h, len);
	host[len] = '\0';
	return true;
}

/* The address of "[ADDRESS:]PORT", refused unless loopback (or any): 0, or -1 with a line. */
static int resolve(const char *spec, bool any, struct addrinfo **ai, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 2], port[8];
	if (!split(spec, host, sizeof(host), port, sizeof(port)) || atoi(port) > 65535) {
		snprintf(err, errlen, "bad --metrics \"%s\" ([ADDRESS:]PORT, a numeric address)",
			 spec);
		return -1;
	}
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM };
	if (getaddrinfo(host, port, &hints, ai) != 0) {
		snprintf(err, errlen, "bad --metrics \"%s\" (not a numeric address: %s)", spec,
			 host);
		return -1;
	}
	if (!any && !loopback((*ai)->ai_addr)) {
		snprintf(err, errlen,
			 "--metrics %s: not a loopback address (--metrics-any allows any)", spec);
		freeaddrinfo(*ai);
		return -1;
	}
	return 0;
}

int ta_metrics_check(const char *spec, bool any, char *err, size_t errlen)
{
	struct addrinfo *ai;
	if (resolve(spec, any, &ai, err, errlen) != 0)
		return -1;
	freeaddrinfo(ai);
	return 0;
}

int ta_metrics_listen(const char *spec, bool any, struct ta_metrics_server **out, char *err,
		      size_t errlen)
{
	struct addrinfo *ai;
	*out = NULL;
	if (resolve(spec, any, &ai, err, errlen) != 0)
		return -1;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, MAX_CLIENTS) != 0) {
		snprintf(err, errlen, "--metrics %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	struct ta_metrics_server *srv = calloc(1, sizeof(*srv));
	if (srv == NULL) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	srv->listen_fd = fd;
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		srv->clients[i].fd = -1;
	/* The address bound: port 0 asks the kernel for a free one. */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char name[INET6_ADDRSTRLEN];
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, name, sizeof(name));
		snprintf(srv->address, sizeof(srv->address), "[%s]:%u", name, ntohs(a->sin6_port));
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, name, sizeof(name));
		snprintf(srv->address, sizeof(srv->address), "%s:%u", name, ntohs(a->sin_port));
	}
	*out = srv;
	return 0;
}

const char *ta_metrics_address(const struct ta_metrics_server *srv)
{
	return srv->address;
}

static void drop(struct client *c)
{
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->inlen = c->outlen = c->outpos = 0;
}

unsigned ta_metrics_pollfds(struct ta_metrics_server *srv, struct pollfd *fds, unsigned max)
{
	unsigned n = 0;
	srv->npolled = 0;
	srv->listen_polled = max > 0;
	if (max > 0)
		fds[n++] = (struct pollfd){ .fd = srv->listen_fd, .events = POLLIN };
	for (unsigned i = 0; i < MAX_CLIENTS && n < max; i++) {
		struct client *c = &srv->clients[i];
		if (c->fd < 0)
			continue;
		fds[n++] = (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
		srv->polled[srv->npolled++] = i;
	}
	return n;
}

int ta_metrics_timeout_ms(const struct ta_metrics_server *srv, uint64_t now_ms)
{
	int t = -1;
	for (unsigned i = 0; i < MAX_CLIENTS; i++) {
		const struct client *c = &srv->clients[i];
		if (c->fd < 0)
			continue;
		int left = c->deadline_ms > now_ms ? (int)(c->deadline_ms - now_ms) : 0;
		if (t < 0 || left < t)
			t = left;
	}
	return t;
}

/* The body for the request in c->in (complete: its headers were all read), in *text. */
static const char *answer(struct client *c, bool complete, ta_metrics_body *body, void *ctx,
			  char **text, size_t *len, const char **type)
{
	*type = "text/plain; charset=utf-8";
	*text = NULL;
	*len = 0;
	FILE *f = open_memstream(text, len);
	if (f == NULL)
		return NULL;
	const char *status;
	c->in[c->inlen] = '\0';
	if (!complete) {
		status = "400 Bad Request";
		fputs("bad request\n", f);
	} else if (strncmp(c->in, "GET /metrics", 12) == 0 &&
		   (c->in[12] == ' ' || c->in[12] == '?')) {
		status = "200 OK";
		*type = "text/plain; version=0.0.4; charset=utf-8";
		if (body(ctx, f) != 0)
			status = NULL;
	} else {
		status = "404 Not Found";
		fputs("not found: the metrics are at /metrics\n", f);
	}
	if (fclose(f) != 0)
		status = NULL;
	if (status == NULL) {
		free(*text);
		*text = NULL;
	}
	return status;
}

/* The whole response to the request in c->in, ready to be sent; the connection is dropped when
 * there is none (the text could not be made). */
static void respond(struct client *c, bool complete, ta_metrics_body *body, void *ctx)
{
	char *text;
	size_t len;
	const char *type;
	const char *status = answer(c, complete, body, ctx, &text, &len, &type);
	if (status == NULL) {
		drop(c);
		return;
	}
	char head[256];
	int hlen = snprintf(head, sizeof(head),
			    "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n\r\n",
			    status, type, len);
	c->out = malloc((size_t)hlen + len);
	if (c->out == NULL) {
		free(text);
		drop(c);
		return;
	}
	memcpy(c->out, head, (size_t)hlen);
	memcpy(c->out + hlen, text, len);
	free(text);
	c->outlen = (size_t)hlen + len;
	c->outpos = 0;
}

/* Read what the client sent; once its headers are in, make the response. */
static void on_readable(struct client *c, ta_metrics_body *body, void *ctx)
{
	ssize_t n = recv(c->fd, c->in + c->inlen, REQUEST_MAX - 1 - c->inlen, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) { /* closed before the end of its request, or an error */
		drop(c);
		return;
	}
	c->inlen += (size_t)n;
	c->in[c->inlen] = '\0';
	if (strstr(c->in, "\r\n\r\n") != NULL || strstr(c->in, "\n\n") != NULL)
		respond(c, true, body, ctx);
	else if (c->inlen >= REQUEST_MAX - 1)
		respond(c, false, body, ctx);
}

static void on_writable(struct client *c)
{
	ssize_t n =
	    send(c->fd, c->out + c->outpos, c->outlen - c->outpos, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n < 0) {
		drop(c);
		return;
	}
	c->outpos += (size_t)n;
	if (c->outpos == c->outlen) {
		shutdown(c->fd, SHUT_WR);
		drop(c);
	}
}

void ta_metrics_serve(struct ta_metrics_server *srv, const struct pollfd *fds, unsigned n,
		      uint64_t now_ms, ta_metrics_body *body, void *ctx)
{
	unsigned first = srv->listen_polled ? 1 : 0;
	/* The connections first: accepting below may reuse their places. */
	for (unsigned k = 0; k < srv->npolled && first + k < n; k++) {
		struct client *c = &srv->clients[srv->polled[k]];
		short ev = fds[first + k].revents;
		if (c->fd < 0 || ev == 0)
			continue;
		if (ev & (POLLERR | POLLNVAL)) {
			drop(c);
			continue;
		}
		if (c->out == NULL && (ev & (POLLIN | POLLHUP)))
			on_readable(c, body, ctx);
		if (c->fd >= 0 && c->out != NULL)
			on_writable(c);
	}
	srv->npolled = 0;
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		if (srv->clients[i].fd >= 0 && now_ms >= srv->clients[i].deadline_ms)
			drop(&srv->clients[i]);
	if (!srv->listen_polled || n == 0 || !(fds[0].revents & POLLIN))
		return;
	/* As many as are waiting, up to the free places; the rest are closed at once. */
	for (unsigned accepted = 0; accepted < 2 * MAX_CLIENTS; accepted++) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		struct client *c = NULL;
		for (unsigned i = 0; i < MAX_CLIENTS && c == NULL; i++)
			if (srv->clients[i].fd < 0)
				c = &srv->clients[i];
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->deadline_ms = now_ms + CLIENT_MS;
		c->inlen = c->outlen = c->outpos = 0;
		c->out = NULL;
	}
}

void ta_metrics_free(struct ta_metrics_server *srv)
{
	if (srv == NULL)
		return;
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		if (srv->clients[i].fd >= 0)
			drop(&srv->clients[i]);
	close(srv->listen_fd);
	free(srv);
}

int ta_metrics_textfile(const char *path, ta_metrics_body *body, void *ctx)
{
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	/* 0644 whatever the umask (the systemd unit's UMask=0077 would make it 0600): its
	 * readers, tieralloc-stat for the status file and node_exporter for --textfile, run as
	 * other users. */
	FILE *f = fchmod(fd, 0644) == 0 ? fdopen(fd, "w") : NULL;
	if (f == NULL) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	int rc = body(ctx, f);
	if (fclose(f) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) == 0)
		return 0;
	int saved = errno;
	unlink(tmp);
	errno = saved;
	return -1;
}
