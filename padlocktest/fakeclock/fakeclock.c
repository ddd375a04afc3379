// fakeclock: an LD_PRELOAD library that moves a process's wall clock, for
// padlocktest.FakeClock. libfaketime does this job, but cannot start inside
// a program linked with jemalloc, as Debian's redis-server is
// (wolfcw/libfaketime#130): its dlsym at start-up allocates, jemalloc reads
// the clock, and the recursion kills the process. This library calls
// nothing that allocates: the true time comes from the clock_gettime
// system call, and its settings from a 32-byte file mapped into memory.
//
// The file ($PADLOCK_FAKECLOCK_FILE) holds, little-endian: a sequence
// number (odd while the writer is changing the rest), base_real and
// base_fake (nanoseconds since the epoch) and rate (a float64). The wall
// clock reads base_fake + (real - base_real) * rate. Only CLOCK_REALTIME
// and CLOCK_REALTIME_COARSE (and gettimeofday and time) move; the other
// clocks are true.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct settings {
	uint64_t seq;
	int64_t base_real;
	int64_t base_fake;
	double rate;
};

static const struct settings *settings;
static int state; // 0: not mapped yet; 1: mapped; -1: no file

static void map_settings(void) {
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 0)
		return;
	int st = -1;
	const char *path = getenv("PADLOCK_FAKECLOCK_FILE");
	if (path != NULL) {
		int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			void *m = mmap(NULL, sizeof(struct settings), PROT_READ, MAP_SHARED, fd, 0);
			syscall(SYS_close, fd);
			if (m != MAP_FAILED) {
				settings = m;
				st = 1;
			}
		}
	}
	__atomic_store_n(&state, st, __ATOMIC_RELEASE);
}

static int64_t fake(int64_t real) {
	map_settings();
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 1)
		return real;
	// A writer holds the sequence odd for microseconds; one that died
	// half-way must not hang the server: after many tries, the true time.
	for (int tries = 0; tries < 1000000; tries++) {
		uint64_t s1 = __atomic_load_n(&settings->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		int64_t br = __atomic_load_n(&settings->base_real, __ATOMIC_RELAXED);
		int64_t bf = __atomic_load_n(&settings->base_fake, __ATOMIC_RELAXED);
		double rate = settings->rate;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&settings->seq, __ATOMIC_RELAXED) != s1)
			continue;
		if (rate == 1.0) // exact: no rounding through a double
			return bf + (real - br);
		if (!(rate > 0) || rate > 1e6)
			return real;
		return bf + (int64_t)((double)(real - br) * rate);
	}
	return real;
}

static int real_clock(clockid_t clk, struct timespec *ts) {
	return (int)syscall(SYS_clock_gettime, clk, ts);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
	int r = real_clock(clk, ts);
	if (r != 0 || (clk != CLOCK_REALTIME && clk != CLOCK_REALTIME_COARSE))
		return r;
	int64_t ns = fake((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec);
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	if (tv != NULL) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return 0;
}

time_t time(time_t *t) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (t != NULL)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
