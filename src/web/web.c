/*
 * `vm web [-l ADDR:PORT] [-c CERT -k KEY]` (web13 contract, "The daemon"):
 * the state folder $vm_dir/.config/web, its metrics token and self-signed
 * certificate, the libwebsockets context (one TLS vhost: the "http"
 * protocol, then ws.c's two relays) and the event loop, with a 200-ms timer
 * for web_tasks_poll() and a clean exit on SIGINT/SIGTERM.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libwebsockets.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "web/http_util.h"
#include "web/web_int.h"
#include "web/ws.h"

#define WEB_USAGE        "usage: vm web [-l addr:port] [-c cert -k key]"
#define DEFAULT_LISTEN   "127.0.0.1:8006"
#define MAX_CONNECTIONS  64
#define POLL_INTERVAL_US (200 * LWS_US_PER_MS)
#define CERT_DAYS        3650
#define EXIT_USAGE       4

static volatile sig_atomic_t web_stop;
static struct lws_context *web_lws; /* for the signal handler */

static void on_signal(int sig)
{
	(void)sig;
	web_stop = 1;
	if (web_lws)
		lws_cancel_service(web_lws);
}

/* ---- options ---- */

struct web_opts {
	const char *listen, *cert, *key;
	char addr[64];
	int port;
};

/* "ADDR:PORT" (ADDR an IPv4 address or name, or [IPv6]); 0 or -1. */
static int parse_listen(struct web_opts *o)
{
	const char *colon = strrchr(o->listen, ':');
	const char *a = o->listen;
	size_t alen;
	char *end;
	long port;

	if (!colon || colon == a)
		return -1;
	alen = (size_t)(colon - a);
	if (a[0] == '[') {
		if (alen < 3 || a[alen - 1] != ']')
			return -1;
		a++;
		alen -= 2;
	}
	if (alen >= sizeof(o->addr))
		return -1;
	memcpy(o->addr, a, alen);
	o->addr[alen] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port < 1 || port > 65535)
		return -1;
	o->port = (int)port;
	return 0;
}

static int parse_opts(int argc, char **argv, struct web_opts *o)
{
	int c;

	*o = (struct web_opts){.listen = DEFAULT_LISTEN};
	optind = 1;
	while ((c = getopt(argc, argv, "+l:c:k:")) != -1) {
		switch (c) {
		case 'l':
			o->listen = optarg;
			break;
		case 'c':
			o->cert = optarg;
			break;
		case 'k':
			o->key = optarg;
			break;
		default:
			vm_error("web: unknown option -%c (%s)", optopt ? optopt : '?', WEB_USAGE);
			return -1;
		}
	}
	if (optind != argc) {
		vm_error("web: unexpected argument '%s' (%s)", argv[optind], WEB_USAGE);
		return -1;
	}
	if (!o->cert != !o->key) {
		vm_error("web: -c and -k go together (%s)", WEB_USAGE);
		return -1;
	}
	if (parse_listen(o) < 0) {
		vm_error("web: -l %s: not ADDR:PORT (port 1-65535)", o->listen);
		return -1;
	}
	return 0;
}

/* ---- folders and files ---- */

static int set_paths(struct web_ctx *ctx)
{
	const char *root = getenv("KHYVE_WEB_ROOT"), *novnc = getenv("KHYVE_NOVNC_DIR");
	char self[PATH_MAX];
	int n;

	if (root && *root) {
		n = snprintf(ctx->web_root, sizeof(ctx->web_root), "%s", root);
	} else {
		snprintf(self, sizeof(self), "%s", ctx->sys->self);
		n = snprintf(ctx->web_root, sizeof(ctx->web_root), "%s/../share/khyve/web",
		             dirname(self));
	}
	if (n >= (int)sizeof(ctx->web_root) ||
	    snprintf(ctx->novnc_root, sizeof(ctx->novnc_root), "%s",
	             novnc && *novnc ? novnc : "/usr/share/novnc") >=
	        (int)sizeof(ctx->novnc_root) ||
	    vm_path(ctx->state_dir, ctx->sys->config_dir, "web") < 0)
		return vm_error("web: a path is too long"), -1;
	return 0;
}

/* The pages' folder as a plain path for the log line (a build tree's
 * "bin/../share" resolved); left as it is when it does not exist. */
static void normalise_root(char *root, size_t len)
{
	char real[PATH_MAX];

	if (realpath(root, real) && strlen(real) < len)
		memcpy(root, real, strlen(real) + 1);
}

/*
 * Whether ADDR:PORT can be bound, asked before libwebsockets binds it:
 * its own failure says only "ERROR on binding fd N" and we would blame the
 * certificate.  0, or -1 with one line naming the address and the reason
 * ("Address already in use").
 */
static int probe_listen(const struct web_opts *o)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char port[8];
	int fd, rc, one = 1;

	snprintf(port, sizeof(port), "%d", o->port);
	if ((rc = getaddrinfo(o->addr[0] ? o->addr : NULL, port, &hints, &ai)) != 0) {
		vm_error("web: -l %s: %s", o->listen, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	rc = fd < 0 ? -1 : 0;
	if (rc == 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
	}
	if (rc < 0)
		vm_error("web: cannot listen on %s: %s", o->listen, strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

static int make_state_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return vm_error("web: cannot create %s: %s", dir, strerror(errno)), -1;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return vm_error("web: %s is not a folder", dir), -1;
	if ((st.st_mode & 077) && chmod(dir, 0700) < 0)
		return vm_error("web: cannot make %s private: %s", dir, strerror(errno)), -1;
	return 0;
}

static bool is_hex64(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* state_dir/metrics.token: read, or made (64 hex digits, 0600) when absent. */
static int load_metrics_token(struct web_ctx *ctx)
{
	char path[PATH_MAX], buf[80] = "";
	ssize_t n;
	int fd;

	if (vm_path(path, ctx->state_dir, "metrics.token") < 0)
		return vm_error("web: a path is too long"), -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\r\n")] = '\0';
		if (!is_hex64(buf))
			return vm_error(
			           "web: %s is not 64 hex digits (remove it to make a new one)",
			           path),
			       -1;
		memcpy(ctx->metrics_token, buf, 65); /* 64 digits and the NUL */
		return 0;
	}
	if (errno != ENOENT)
		return vm_error("web: cannot read %s: %s", path, strerror(errno)), -1;
	if (web_random_hex(ctx->metrics_token, 32) < 0)
		return vm_error("web: getrandom failed"), -1;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return vm_error("web: cannot create %s: %s", path, strerror(errno)), -1;
	snprintf(buf, sizeof(buf), "%s\n", ctx->metrics_token);
	n = write(fd, buf, strlen(buf));
	if (close(fd) < 0 || n != (ssize_t)strlen(buf)) {
		unlink(path);
		return vm_error("web: cannot write %s", path), -1;
	}
	web_log("made the metrics token %s", path);
	return 0;
}

/* ---- the self-signed certificate ---- */

static bool dns_name_ok(const char *h)
{
	if (!*h || strlen(h) > 253)
		return false;
	for (; *h; h++)
		if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') ||
		      (*h >= '0' && *h <= '9') || *h == '-' || *h == '.'))
			return false;
	return true;
}

static int add_san(X509 *x, const char *host)
{
	char san[400];
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int rc;

	if (dns_name_ok(host) && strcmp(host, "localhost"))
		snprintf(san, sizeof(san), "DNS:localhost,IP:127.0.0.1,DNS:%s", host);
	else
		snprintf(san, sizeof(san), "DNS:localhost,IP:127.0.0.1");
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
	if (!ext)
		return -1;
	rc = X509_add_ext(x, ext, -1) ? 0 : -1;
	X509_EXTENSION_free(ext);
	return rc;
}

/* An EC P-256 key and a 10-year self-signed certificate for it (CN = host). */
static X509 *make_cert(EVP_PKEY *key, const char *host)
{
	X509 *x = X509_new();
	X509_NAME *name;
	unsigned char serial[16];
	BIGNUM *bn = NULL;
	bool serial_ok;

	if (!x || !X509_set_version(x, 2) || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f; /* a positive serial number */
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	serial_ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	if (!serial_ok || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), (long)CERT_DAYS * 86400) ||
	    !X509_set_pubkey(x, key))
		goto fail;
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_txt(
	        name, "CN", MBSTRING_UTF8,
	        (const unsigned char *)(dns_name_ok(host) ? host : "localhost"), -1, -1, 0) ||
	    !X509_set_issuer_name(x, name) || add_san(x, host) < 0 ||
	    !X509_sign(x, key, EVP_sha256()))
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* Write PATH.tmp (mode) with write_fn, then rename it to PATH; 0 or -1. */
static int write_pem(const char *path, mode_t mode, int (*write_fn)(FILE *f, void *obj), void *obj)
{
	char tmp[PATH_MAX];
	FILE *f;
	int fd, ok;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	ok = write_fn(f, obj) && fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0 || !ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int write_key(FILE *f, void *key)
{
	return PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
}

static int write_x509(FILE *f, void *x)
{
	return PEM_write_X509(f, x);
}

/* state_dir/cert.pem and key.pem, made when either is missing. */
static int ensure_cert(const char *cert, const char *key)
{
	char host[256] = "localhost";
	EVP_PKEY *pkey;
	X509 *x = NULL;
	int rc = -1;

	if (access(cert, R_OK) == 0 && access(key, R_OK) == 0)
		return 0;
	gethostname(host, sizeof(host) - 1);
	pkey = EVP_EC_gen("P-256");
	if (pkey)
		x = make_cert(pkey, host);
	if (x && write_pem(key, 0600, write_key, pkey) == 0 &&
	    write_pem(cert, 0644, write_x509, x) == 0)
		rc = 0;
	X509_free(x);
	EVP_PKEY_free(pkey);
	if (rc < 0)
		return vm_error("web: cannot make the certificate %s", cert), -1;
	web_log("made a self-signed certificate %s (CN %s)", cert, host);
	return 0;
}

/* ---- the loop ---- */

struct web_timer {
	lws_sorted_usec_list_t sul; /* first: the callback gets its address */
	struct web_ctx *ctx;
};

static void on_timer(lws_sorted_usec_list_t *sul)
{
	struct web_timer *t = lws_container_of(sul, struct web_timer, sul);

	web_tasks_poll(t->ctx);
	lws_sul_schedule(t->ctx->lws, 0, &t->sul, on_timer, POLL_INTERVAL_US);
}

static void lws_log_line(int level, const char *line)
{
	size_t n = strlen(line);

	(void)level;
	while (n && line[n - 1] == '\n')
		n--;
	fprintf(stderr, "vm web: lws: %.*s\n", (int)n, line);
}

static struct lws_context *make_lws(struct web_ctx *ctx, const struct web_opts *o, const char *cert,
                                    const char *key)
{
	static struct lws_protocols protocols[5];
	struct lws_context_creation_info info;

	protocols[0] = web_http_protocol;
	protocols[1] = web_ws_vnc_protocol;
	protocols[2] = web_ws_serial_protocol;
	protocols[3] = web_ws_raw_protocol;
	memset(&protocols[4], 0, sizeof(protocols[4]));
	memset(&info, 0, sizeof(info));
	info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
	info.port = o->port;
	info.iface = o->addr;
	info.protocols = protocols;
	info.vhost_name = "khyve";
	info.ssl_cert_filepath = cert;
	info.ssl_private_key_filepath = key;
	info.alpn = "http/1.1"; /* one protocol to handle: no HTTP/2 */
	info.user = ctx;
	info.max_http_header_data = 8192;
	info.max_http_header_pool = MAX_CONNECTIONS;
	info.timeout_secs = 30;
	info.timeout_secs_ah_idle = 30;
	info.keepalive_timeout = 30;
	/* The browser's connections and a guest-side socket or pty for each
	 * relay, plus the listener and lws's own pipe. */
	info.fd_limit_per_thread = 2 * MAX_CONNECTIONS + 8;
	info.count_threads = 1;
	return lws_create_context(&info);
}

static int run_loop(struct web_ctx *ctx)
{
	struct web_timer timer = {.ctx = ctx};
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	lws_sul_schedule(ctx->lws, 0, &timer.sul, on_timer, POLL_INTERVAL_US);
	while (!web_stop)
		if (lws_service(ctx->lws, 0) < 0)
			break;
	lws_sul_cancel(&timer.sul);
	return web_stop ? 0 : 1;
}

int cmd_web(struct vm_sys *sys, int argc, char **argv)
{
	struct web_ctx *ctx;
	struct web_opts o;
	char err[1024], cert[PATH_MAX], key[PATH_MAX];
	int rc = 1;

	if (parse_opts(argc, argv, &o) < 0)
		return EXIT_USAGE;
	if (vm_sys_require_init(sys, err, sizeof(err)) < 0)
		return vm_error("%s", err);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return vm_error("web: out of memory");
	ctx->sys = sys;
	snprintf(ctx->listen, sizeof(ctx->listen), "%s", o.listen);
	if (set_paths(ctx) < 0 || probe_listen(&o) < 0 || make_state_dir(ctx->state_dir) < 0 ||
	    load_metrics_token(ctx) < 0)
		goto out;
	normalise_root(ctx->web_root, sizeof(ctx->web_root));
	if (o.cert) {
		if (access(o.cert, R_OK) < 0 || access(o.key, R_OK) < 0) {
			vm_error("web: cannot read %s: %s",
			         access(o.cert, R_OK) < 0 ? o.cert : o.key, strerror(errno));
			goto out;
		}
		snprintf(cert, sizeof(cert), "%s", o.cert);
		snprintf(key, sizeof(key), "%s", o.key);
	} else if (vm_path(cert, ctx->state_dir, "cert.pem") < 0 ||
	           vm_path(key, ctx->state_dir, "key.pem") < 0 || ensure_cert(cert, key) < 0) {
		goto out;
	}
	lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_line);
	if (web_auth_init(ctx) < 0)
		goto out;
	if (web_tasks_init(ctx) < 0) {
		vm_error("web: cannot set up the task list");
		goto out;
	}
	ctx->lws = make_lws(ctx, &o, cert, key);
	if (!ctx->lws) {
		vm_error("web: cannot listen on %s with %s and %s", o.listen, cert, key);
		goto out_tasks;
	}
	web_lws = ctx->lws;
	web_log("listening on https://%s/ (pages %s, noVNC %s)", o.listen, ctx->web_root,
	        ctx->novnc_root);
	rc = run_loop(ctx);
	web_log("%s", rc ? "the event loop failed" : "stopped");
	web_auth_stop(ctx);
	web_lws = NULL;
	lws_context_destroy(ctx->lws);
	ctx->lws = NULL;
out_tasks:
	web_tasks_free(ctx);
out:
	web_auth_free(ctx);
	explicit_bzero(ctx->metrics_token, sizeof(ctx->metrics_token));
	if (!ctx->auth)
		free(ctx);
	return rc;
}
