/* rc.conf-style settings files (see rcconf.h). */
#include "vm/rcconf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A settings file larger than this is not one (a link to a disk image, say). */
#define RCCONF_MAX_BYTES (1024 * 1024)

/* One line of the file; `key` is NULL for comments and other kept lines. */
struct rc_line {
	char *raw;
	char *key;
	char *value;
};

struct rcconf {
	struct rc_line *lines;
	size_t n, cap;
};

struct rcconf *rcconf_new(void)
{
	return calloc(1, sizeof(struct rcconf));
}

static void line_clear(struct rc_line *l)
{
	free(l->raw);
	free(l->key);
	free(l->value);
}

void rcconf_free(struct rcconf *rc)
{
	if (!rc)
		return;
	for (size_t i = 0; i < rc->n; i++)
		line_clear(&rc->lines[i]);
	free(rc->lines);
	free(rc);
}

static int append_line(struct rcconf *rc, struct rc_line l)
{
	if (rc->n == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 16;
		struct rc_line *n = realloc(rc->lines, cap * sizeof(*n));
		if (!n)
			return -1;
		rc->lines = n;
		rc->cap = cap;
	}
	rc->lines[rc->n++] = l;
	return 0;
}

bool rcconf_key_valid(const char *key)
{
	if (!key || !*key || isdigit((unsigned char)key[0]))
		return false;
	for (const char *p = key; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

bool rcconf_value_valid(const char *value)
{
	return value && !strpbrk(value, "\"#\\$`\n\r");
}

/* Parse the value part of `key=...` (comment already cut off) into a
 * malloc'd string, or NULL with a reason. */
static char *parse_value(const char *s, bool cut, const char **why)
{
	size_t len = strlen(s);
	char *out = malloc(len + 1), *o = out;
	const char *p = s;

	if (!out) {
		*why = "out of memory";
		return NULL;
	}
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
				p++;
			*o++ = *p;
		}
		/* vm-bhyve cuts comments first and drops quotes, so `a="x#y"`
		 * reads as x: accept a quote the comment cut off. */
		if (*p != '"' && !cut) {
			*why = "missing closing '\"'";
			goto bad;
		}
		if (*p == '"')
			p++;
		else
			while (o > out && isspace((unsigned char)o[-1]))
				o--;
	} else if (*p == '\'') {
		for (p++; *p && *p != '\''; p++)
			*o++ = *p;
		if (*p != '\'') {
			*why = "missing closing \"'\"";
			goto bad;
		}
		p++;
	} else {
		while (*p && !isspace((unsigned char)*p)) {
			if (strchr("\"'\\$`;&|<>()", *p)) {
				*why = "unquoted special character in value";
				goto bad;
			}
			*o++ = *p++;
		}
	}
	*o = '\0';
	while (isspace((unsigned char)*p))
		p++;
	if (*p) {
		*why = "text after the value";
		goto bad;
	}
	return out;
bad:
	free(out);
	return NULL;
}

/* Fill `l` from one line of text; 0 or -1 with `why`. */
static int parse_line(const char *raw, struct rc_line *l, const char **why)
{
	char *body = strdup(raw), *eq, *hash;

	*l = (struct rc_line){.raw = strdup(raw)};
	if (!body || !l->raw) {
		free(body);
		*why = "out of memory";
		return -1;
	}
	if ((hash = strchr(body, '#')))
		*hash = '\0';
	/* Indented lines are ignored by vm-bhyve; keep them as they are. */
	if (!*body || isspace((unsigned char)body[0])) {
		free(body);
		return 0;
	}
	eq = strchr(body, '=');
	if (!eq) {
		*why = "expected key=\"value\"";
		goto bad;
	}
	*eq = '\0';
	if (!rcconf_key_valid(body)) {
		*why = "bad setting name";
		goto bad;
	}
	l->value = parse_value(eq + 1, hash != NULL, why);
	if (!l->value)
		goto bad;
	l->key = strdup(body);
	free(body);
	return l->key ? 0 : -1;
bad:
	free(body);
	return -1;
}

struct rcconf *rcconf_parse(const char *text, const char *name, char *err, size_t errlen)
{
	struct rcconf *rc = rcconf_new();
	unsigned lineno = 0;

	if (!rc) {
		snprintf(err, errlen, "%s: out of memory", name);
		return NULL;
	}
	while (*text) {
		size_t len = strcspn(text, "\n");
		char *raw = strndup(text, len);
		struct rc_line l;
		const char *why = "out of memory";

		lineno++;
		text += len + (text[len] == '\n');
		if (!raw || parse_line(raw, &l, &why) < 0 || append_line(rc, l) < 0) {
			if (raw)
				line_clear(&l);
			free(raw);
			snprintf(err, errlen, "%s:%u: %s", name, lineno, why);
			rcconf_free(rc);
			return NULL;
		}
		free(raw);
	}
	return rc;
}

/*
 * Open a settings file for reading: a FIFO or socket put there (a guest
 * folder may come from anywhere) would block `vm list` forever.
 */
static FILE *open_settings(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), e = 0;
	struct stat st;
	FILE *f = NULL;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		e = errno;
	else if (S_ISDIR(st.st_mode))
		e = EISDIR;
	else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		e = EINVAL;
	else if (!(f = fdopen(fd, "r")))
		e = errno;
	if (f)
		return f;
	close(fd);
	errno = e;
	return NULL;
}

struct rcconf *rcconf_load(const char *path, char *err, size_t errlen)
{
	FILE *f = open_settings(path);
	char *text = NULL;
	size_t len = 0, total = 0;
	struct rcconf *rc;
	int e;

	if (!f) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	FILE *mem = open_memstream(&text, &len);
	char buf[4096];
	size_t got;
	while (mem && total <= RCCONF_MAX_BYTES && (got = fread(buf, 1, sizeof(buf), f)) > 0) {
		fwrite(buf, 1, got, mem);
		total += got;
	}
	e = ferror(f) ? errno : total > RCCONF_MAX_BYTES ? EFBIG : 0;
	fclose(f);
	if (!mem || fclose(mem) != 0 || e) {
		snprintf(err, errlen, "%s: %s", path, strerror(e ? e : ENOMEM));
		free(text);
		errno = e ? e : ENOMEM;
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "%s: not a text file", path);
		free(text);
		errno = EINVAL;
		return NULL;
	}
	rc = rcconf_parse(text, path, err, errlen);
	free(text);
	if (!rc)
		errno = EINVAL;
	return rc;
}

/* Index of the first line that sets `key`, or -1: vm-bhyve reads a
 * setting with the first matching line. */
static long first_line_of(const struct rcconf *rc, const char *key)
{
	for (size_t i = 0; i < rc->n; i++)
		if (rc->lines[i].key && !strcmp(rc->lines[i].key, key))
			return (long)i;
	return -1;
}

/* Index of the last line that sets `key`, or -1. */
static long last_line_of(const struct rcconf *rc, const char *key)
{
	for (size_t i = rc->n; i-- > 0;)
		if (rc->lines[i].key && !strcmp(rc->lines[i].key, key))
			return (long)i;
	return -1;
}

const char *rcconf_get(const struct rcconf *rc, const char *key)
{
	long i = rc ? first_line_of(rc, key) : -1;

	return i < 0 ? NULL : rc->lines[i].value;
}

const char *rcconf_get_default(const struct rcconf *rc, const char *key, const char *def)
{
	const char *v = rcconf_get(rc, key);

	return v ? v : def;
}

bool rcconf_get_yes(const struct rcconf *rc, const char *key)
{
	const char *v = rcconf_get(rc, key);

	return v && (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on") ||
	             !strcmp(v, "1"));
}

static void remove_line(struct rcconf *rc, size_t i)
{
	line_clear(&rc->lines[i]);
	memmove(&rc->lines[i], &rc->lines[i + 1], (rc->n - i - 1) * sizeof(rc->lines[0]));
	rc->n--;
}

int rcconf_set(struct rcconf *rc, const char *key, const char *value)
{
	struct rc_line l = {0};
	long at;

	if (!rcconf_key_valid(key) || (value && !rcconf_value_valid(value)))
		return -1;
	if (!value) {
		while ((at = last_line_of(rc, key)) >= 0)
			remove_line(rc, (size_t)at);
		return 0;
	}
	if (asprintf(&l.raw, "%s=\"%s\"", key, value) < 0)
		return -1;
	l.key = strdup(key);
	l.value = strdup(value);
	if (!l.key || !l.value)
		goto fail;
	at = first_line_of(rc, key);
	if (at >= 0) {
		long dup;
		/* Later duplicates would contradict the new value for sh readers. */
		while ((dup = last_line_of(rc, key)) > at)
			remove_line(rc, (size_t)dup);
		line_clear(&rc->lines[at]);
		rc->lines[at] = l;
		return 0;
	}
	if (append_line(rc, l) == 0)
		return 0;
fail:
	line_clear(&l);
	return -1;
}

/* The i-th line that is the first assignment of its key, or -1. */
static long nth_setting(const struct rcconf *rc, size_t nth)
{
	for (size_t i = 0; i < rc->n; i++) {
		if (!rc->lines[i].key || first_line_of(rc, rc->lines[i].key) != (long)i)
			continue;
		if (nth-- == 0)
			return (long)i;
	}
	return -1;
}

size_t rcconf_count(const struct rcconf *rc)
{
	size_t n = 0;

	while (nth_setting(rc, n) >= 0)
		n++;
	return n;
}

const char *rcconf_key_at(const struct rcconf *rc, size_t i)
{
	long at = nth_setting(rc, i);

	return at < 0 ? NULL : rc->lines[at].key;
}

const char *rcconf_value_at(const struct rcconf *rc, size_t i)
{
	long at = nth_setting(rc, i);

	return at < 0 ? NULL : rc->lines[at].value;
}

char *rcconf_format(const struct rcconf *rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < rc->n; i++)
		fprintf(f, "%s\n", rc->lines[i].raw);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

int rcconf_save(const struct rcconf *rc, const char *path, char *err, size_t errlen)
{
	char tmp[PATH_MAX], *text = rcconf_format(rc);
	struct stat st;
	mode_t mode = 0644;
	int fd = -1, e = ENOMEM;

	if (!text)
		goto fail;
	if (stat(path, &st) == 0)
		mode = st.st_mode & 07777;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
		e = ENAMETOOLONG;
		goto fail;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		e = errno;
		goto fail;
	}
	size_t len = strlen(text), done = 0;
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);
		if (w < 0) {
			e = errno;
			goto fail_unlink;
		}
		done += (size_t)w;
	}
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0 || close(fd) < 0) {
		e = errno;
		fd = -1;
		goto fail_unlink;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		e = errno;
		goto fail_unlink;
	}
	free(text);
	return 0;
fail_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
fail:
	free(text);
	snprintf(err, errlen, "%s: %s", path, strerror(e));
	return -1;
}
