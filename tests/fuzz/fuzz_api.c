/*
 * libFuzzer target for the API's request handling (src/run/api.c): what a
 * client on the socket controls after libmicrohttpd has parsed the HTTP,
 * the method, the path and the body, handed to api_handle() on a machine
 * without KVM with a keyboard sink, a small fake display, fake counter
 * sources and a fake CD drive (cd0, its tray locked every other change).  Every reply must be a
 * well-formed status with a body the reply owns; nothing may crash, leak or hang.
 *
 * Input: u8 method (n%4: GET, PUT, POST, the rest of the line as the
 * method), the path up to the first '\n', then the body (raw bytes).
 */
#include "fuzz.h"

#include <unistd.h>

#include "core/machine.h"
#include "lib/config.h"
#include "lib/counters.h"
#include "run/api.h"

static struct machine m;
static struct api a;
static unsigned keys_seen;

static void key_sink(void *arg, bool down, uint16_t qnum)
{
	(void)arg;
	(void)down;
	(void)qnum;
	keys_seen++;
}

static int fake_display(void *arg, uint32_t **px, uint32_t *w, uint32_t *h)
{
	(void)arg;
	*w = 16;
	*h = 8;
	*px = calloc(16 * 8, sizeof(uint32_t));
	return *px != NULL ? 0 : -1;
}

static void read_fake(void *arg, struct counter_out *o)
{
	static struct lat_hist h;

	(void)arg;
	o->put(o, "exits_total", 1);
	counter_put_lat(o, "latency_us", &h);
}

static struct counter_source src[2] = {
    {.kind = COUNTER_VCPU, .name = "0", .read = read_fake},
    {.kind = COUNTER_DISK, .name = "disk0", .read = read_fake},
};

static bool cd_locked;

/* vm.media-eject reaches this with fd -1; refuses every other change. */
static int fake_change(void *dev, int fd, bool force, char *err, size_t errlen)
{
	(void)dev;
	if (fd >= 0)
		close(fd);
	cd_locked = !cd_locked;
	if (cd_locked && !force) {
		snprintf(err, errlen, "the guest locked the tray (force ejects anyway)");
		return -1;
	}
	return 0;
}

static void fake_state(void *dev, bool *present, bool *locked, uint64_t *bytes)
{
	(void)dev;
	*present = true;
	*locked = cd_locked;
	*bytes = 2048;
}

static void setup_once(void)
{
	struct machine_media_drive cd = {.name = "cd0",
	                                 .device = "ahci-cd",
	                                 .slot = "4:0",
	                                 .change = fake_change,
	                                 .state = fake_state};

	log_max_level = LOG_ERR;
	config_set("memory.size", "64M");
	config_set("pci.0.4.0.device", "virtio-blk");
	machine_init_detached(&m, "fuzz", NULL, 0, 0);
	machine_add_key_sink(&m, key_sink, NULL);
	machine_set_screenshot(&m, fake_display, NULL);
	machine_add_media_drive(&m, &cd);
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		counters_register(&src[i]);
	if (api_init(&a, &m) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = {"GET", "PUT", "POST"};
	static bool ready;
	char method[16] = "", url[512];
	const uint8_t *nl;
	size_t ulen;
	struct api_reply r;

	if (!ready) {
		setup_once();
		ready = true;
	}
	if (size == 0)
		return 0;
	nl = memchr(data + 1, '\n', size - 1);
	ulen = nl != NULL ? (size_t)(nl - data - 1) : size - 1;
	if (ulen >= sizeof(url))
		ulen = sizeof(url) - 1;
	memcpy(url, data + 1, ulen);
	url[ulen] = '\0';
	if (data[0] % 4 < 3)
		snprintf(method, sizeof(method), "%s", methods[data[0] % 4]);
	else
		snprintf(method, sizeof(method), "%.*s", (int)(ulen < 15 ? ulen : 15), url);
	if (nl != NULL)
		api_handle(&a, method, url, (const char *)nl + 1, size - (size_t)(nl + 1 - data),
		           &r);
	else
		api_handle(&a, method, url, NULL, 0, &r);
	if (r.status < 200 || r.status > 599 || (r.len > 0 && r.body == NULL))
		abort();
	api_reply_free(&r);
	machine_resume(&m); /* every input starts running */
	return 0;
}
