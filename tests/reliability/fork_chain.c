/* A fork chain (hostile_processor): each generation forks one child and exits at once. Args: BASE SECONDS PID_DIR.
   One pid file, locked through every generation (the lock goes with the open file); heartbeats as the other helpers write them. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
static long long ns(int clock) { struct timespec t; clock_gettime(clock, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static void mark(const char *base, const char *kind) {
    char path[4096], temporary[4096];
    snprintf(path, sizeof path, "%s.%s", base, kind);
    snprintf(temporary, sizeof temporary, "%s.%s.%d.tmp", base, kind, getpid());
    FILE *f = fopen(temporary, "w");
    if (f) { fprintf(f, "%lld", ns(CLOCK_REALTIME)); fclose(f); rename(temporary, path); }
}
int main(int argc, char **argv) {
    const char *base = argv[1], *pid_dir = argv[3];
    char pid_file[4096], temporary[4096];
    snprintf(pid_file, sizeof pid_file, "%s/%d", pid_dir, getpid());
    snprintf(temporary, sizeof temporary, "%s.tmp", pid_file);
    int alive = open(temporary, O_CREAT | O_WRONLY, 0644);
    flock(alive, LOCK_EX);
    const char *name = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    write(alive, name, strlen(name));
    rename(temporary, pid_file);
    mark(base, "start");
    long long until = ns(CLOCK_MONOTONIC) + (long long)(atof(argv[2]) * 1e9), last = 0;
    while (ns(CLOCK_MONOTONIC) < until) {
        if (ns(CLOCK_MONOTONIC) - last > 20000000LL) { mark(base, "beat"); last = ns(CLOCK_MONOTONIC); }
        pid_t child = fork();
        if (child > 0) _exit(0);
        if (child < 0) usleep(100);
    }
    mark(base, "end");
    return 0;
}
