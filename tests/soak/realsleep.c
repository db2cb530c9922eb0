/* The chaos soak's companion to libfaketime (tests/soak/harness.py): clock_nanosleep made the
 * system call itself, so libfaketime's does not see it. With FAKETIME_DONT_FAKE_MONOTONIC=1
 * (a step moves the wall clock only, as `date -s` on a node does), libfaketime 0.9.10's
 * clock_nanosleep answers EINVAL to the CLOCK_MONOTONIC sleeps Python's time.sleep makes, and a
 * worker under it died of its first sleep. Listed before libfaketime in LD_PRELOAD. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
    long r = syscall(SYS_clock_nanosleep, clock, flags, req, rem);
    return r == 0 ? 0 : errno;
}
