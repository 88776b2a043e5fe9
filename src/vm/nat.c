/*
 * NAT for a switch (switch.h): the host masquerades the switch's subnet
 * (one nftables table per switch, "table ip khyve-NAME", so turning NAT off
 * deletes exactly what turning it on added), IPv4 forwarding is enabled
 * (and left on: other things on the host may rely on it), and dnsmasq
 * serves DHCP and DNS on the switch's bridge only.
 *
 * dnsmasq's pid file and leases live in $vm_dir/.config/nat/ (NAME.pid,
 * NAME.leases): the leases survive reboots so guests keep their addresses.
 * A pid file is trusted only when /proc/PID/cmdline is a dnsmasq bound to
 * the switch's bridge, so a stale file after a reboot never gets an
 * unrelated process killed.
 *
 * The table only adds masquerading; a host firewall whose forward chain
 * drops traffic (Docker, ufw) must still let the bridge's traffic through.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vm/switch.h"
#include "vm/util.h"

#define CMDLINE_MAX     8192
#define STOP_WAIT_MS    3000
#define STOP_POLL_MS    20
#define DHCP_LEASE_TIME "12h"

void vm_nat_table(const struct vm_switch *sw, char *out, size_t len)
{
	snprintf(out, len, "khyve-%s", sw->name);
}

char *vm_nat_nft_script(const struct vm_switch *sw)
{
	char table[32], net[24], *script;

	vm_nat_table(sw, table, sizeof(table));
	vm_cidr_network(&sw->addr, net, sizeof(net));
	/* "add" then "delete" makes the load replace an old table in one
	 * transaction, whether or not it existed. */
	if (asprintf(&script,
	             "add table ip %s\n"
	             "delete table ip %s\n"
	             "table ip %s {\n"
	             "\tchain postrouting {\n"
	             "\t\ttype nat hook postrouting priority 100; policy accept;\n"
	             "\t\tip saddr %s oifname != \"%s\" masquerade\n"
	             "\t}\n"
	             "}\n",
	             table, table, table, net, sw->bridge) < 0)
		return NULL;
	return script;
}

int vm_nat_file(const struct vm_sys *sys, const struct vm_switch *sw, const char *ext, char *out)
{
	int n = snprintf(out, PATH_MAX, "%s/nat/%s.%s", sys->config_dir, sw->name, ext);

	return n < 0 || n >= PATH_MAX ? -1 : 0;
}

int vm_nat_dnsmasq_argv(const struct vm_sys *sys, const struct vm_switch *sw, struct argv *out)
{
	char lo[16], hi[16], pid[PATH_MAX], leases[PATH_MAX];

	if (!sw->has_addr || vm_dhcp_range(&sw->addr, lo, hi) < 0 ||
	    vm_nat_file(sys, sw, "pid", pid) || vm_nat_file(sys, sw, "leases", leases))
		return -1;
	/* /dev/null as the config file keeps /etc/dnsmasq.conf (a host's own
	 * DNS setup) out; --bind-interfaces with only the bridge keeps us off
	 * every other interface. */
	if (argv_add(out, "dnsmasq") || argv_add(out, "--conf-file=/dev/null") ||
	    argv_addf(out, "--interface=%s", sw->bridge) ||
	    argv_add(out, "--except-interface=lo") || argv_add(out, "--bind-interfaces") ||
	    argv_addf(out, "--dhcp-range=%s,%s,%s", lo, hi, DHCP_LEASE_TIME) ||
	    argv_addf(out, "--dhcp-leasefile=%s", leases) || argv_addf(out, "--pid-file=%s", pid) ||
	    argv_add(out, "--dhcp-authoritative"))
		return -1;
	return 0;
}

/* /proc/PID/cmdline (NUL-separated) into buf; its length, 0 when gone. */
static size_t read_cmdline(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	got = read(fd, buf, len - 1);
	close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	return (size_t)got;
}

/* The i-th NUL-separated word of a cmdline, or NULL. */
static const char *cmdline_arg(const char *buf, size_t len, size_t i)
{
	size_t at = 0;

	while (i-- > 0 && at < len)
		at += strlen(buf + at) + 1;
	return at < len ? buf + at : NULL;
}

static bool is_our_dnsmasq(const char *buf, size_t len, const char *bridge)
{
	const char *argv0 = cmdline_arg(buf, len, 0), *base, *a;
	char want[64];

	if (!argv0)
		return false;
	base = strrchr(argv0, '/');
	if (strcmp(base ? base + 1 : argv0, "dnsmasq"))
		return false;
	snprintf(want, sizeof(want), "--interface=%s", bridge);
	for (size_t i = 1; (a = cmdline_arg(buf, len, i)); i++)
		if (!strcmp(a, want))
			return true;
	return false;
}

static pid_t read_pid_file(const char *path)
{
	char buf[32];
	ssize_t got;
	long pid;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	pid = strtol(buf, NULL, 10);
	return pid > 1 ? (pid_t)pid : 0;
}

pid_t vm_nat_dnsmasq_pid(const struct vm_sys *sys, const struct vm_switch *sw)
{
	char path[PATH_MAX], cmd[CMDLINE_MAX];
	pid_t pid;
	size_t len;

	if (vm_nat_file(sys, sw, "pid", path) < 0 || !(pid = read_pid_file(path)))
		return 0;
	len = read_cmdline(pid, cmd, sizeof(cmd));
	return len && is_our_dnsmasq(cmd, len, sw->bridge) ? pid : 0;
}

/* True when `pid` runs exactly `want` (arguments after argv[0]). */
static bool runs_argv(pid_t pid, const struct argv *want)
{
	char cmd[CMDLINE_MAX];
	size_t len = read_cmdline(pid, cmd, sizeof(cmd)), i;
	const char *a;

	for (i = 1; i < want->n; i++)
		if (!(a = cmdline_arg(cmd, len, i)) || strcmp(a, want->v[i]))
			return false;
	return !cmdline_arg(cmd, len, i);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* SIGTERM the switch's dnsmasq and wait for it to go (a zombie has no
 * cmdline, so it counts as gone). */
static int stop_dnsmasq(const struct vm_sys *sys, const struct vm_switch *sw, char *err,
                        size_t errlen)
{
	char path[PATH_MAX];
	pid_t pid = vm_nat_dnsmasq_pid(sys, sw);

	if (pid && kill(pid, SIGTERM) < 0 && errno != ESRCH) {
		snprintf(err, errlen, "stopping dnsmasq (pid %ld): %s", (long)pid, strerror(errno));
		return -1;
	}
	for (int waited = 0; pid && vm_nat_dnsmasq_pid(sys, sw) == pid; waited += STOP_POLL_MS) {
		if (waited >= STOP_WAIT_MS) {
			snprintf(err, errlen, "dnsmasq (pid %ld) of switch %s did not stop",
			         (long)pid, sw->name);
			return -1;
		}
		sleep_ms(STOP_POLL_MS);
	}
	if (vm_nat_file(sys, sw, "pid", path) == 0)
		unlink(path);
	return 0;
}

static int enable_forwarding(char *err, size_t errlen)
{
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "1\n", 2) != 2) {
		snprintf(err, errlen, "enabling IPv4 forwarding: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int run_nft(const char *script, const char *what, char *err, size_t errlen)
{
	const char *argv[] = {"nft", "-f", "-", NULL};

	return vm_tool_run(&(struct vm_tool){.argv = argv, .input = script, .what = what}, err,
	                   errlen);
}

static int make_nat_dir(const struct vm_sys *sys, char *err, size_t errlen)
{
	char dir[PATH_MAX];

	if (vm_path(dir, sys->config_dir, "nat") < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST)) {
		snprintf(err, errlen, "%s/nat: %s", sys->config_dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Start dnsmasq unless one with the same arguments runs (an address
 * change restarts it with the new range). */
static int start_dnsmasq(const struct vm_sys *sys, const struct vm_switch *sw, char *err,
                         size_t errlen)
{
	struct argv a = {0};
	char what[96];
	pid_t pid;
	int rc = -1;

	if (vm_nat_dnsmasq_argv(sys, sw, &a) < 0) {
		snprintf(err, errlen, "switch %s: cannot build the dnsmasq command", sw->name);
		goto out;
	}
	pid = vm_nat_dnsmasq_pid(sys, sw);
	if (pid && runs_argv(pid, &a)) {
		rc = 0;
		goto out;
	}
	if (stop_dnsmasq(sys, sw, err, errlen) < 0 || make_nat_dir(sys, err, errlen) < 0)
		goto out;
	snprintf(what, sizeof(what), "starting dnsmasq (DHCP) on %s", sw->bridge);
	/* dnsmasq returns once its daemon is set up, pid file written. */
	rc = vm_tool_run(&(struct vm_tool){.argv = (const char *const *)a.v, .what = what}, err,
	                 errlen);
out:
	argv_free(&a);
	return rc;
}

int vm_nat_start(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen)
{
	char lo[16], hi[16], what[64], *script;
	int rc;

	if (!sw->has_addr || vm_dhcp_range(&sw->addr, lo, hi) < 0) {
		snprintf(
		    err, errlen,
		    "switch %s: NAT needs a host address in a /30 or larger subnet on the switch "
		    "(vm switch address %s 10.0.0.1/24)",
		    sw->name, sw->name);
		return -1;
	}
	if (enable_forwarding(err, errlen) < 0)
		return -1;
	if (!(script = vm_nat_nft_script(sw))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(what, sizeof(what), "loading the NAT rules of switch %s", sw->name);
	rc = run_nft(script, what, err, errlen);
	free(script);
	return rc < 0 ? -1 : start_dnsmasq(sys, sw, err, errlen);
}

int vm_nat_stop(const struct vm_sys *sys, const struct vm_switch *sw, char *err, size_t errlen)
{
	char table[32], script[128], what[64];

	if (stop_dnsmasq(sys, sw, err, errlen) < 0)
		return -1;
	vm_nat_table(sw, table, sizeof(table));
	snprintf(script, sizeof(script), "add table ip %s\ndelete table ip %s\n", table, table);
	snprintf(what, sizeof(what), "removing the NAT rules of switch %s", sw->name);
	return run_nft(script, what, err, errlen);
}
