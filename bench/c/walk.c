/* The floor for a load-path scan: a minimal recursive readdir walker using d_type
 * (no stat per entry; lstat only when d_type is DT_UNKNOWN, stat for symlinks so they are
 * followed like the real scanners do). Skips dot entries. Counts every regular file and the
 * loadable ones (*.rb, *.so).
 *
 *   gcc -O2 -o walk bench/c/walk.c     (bench/scan.rb does this into tmp/bench/)
 *   walk ROOTS_FILE REPS   -> one line per repetition: "ns files loadable dirs"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long files, loadable, dirs;

static int ends_with(const char *s, size_t n, const char *suf) {
  size_t m = strlen(suf);
  return n > m && memcmp(s + n - m, suf, m) == 0;
}

static void walk(int dirfd, int depth) {
  DIR *d = fdopendir(dirfd);
  if (!d) { close(dirfd); return; }
  dirs++;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    unsigned char t = e->d_type;
    if (t == DT_UNKNOWN || t == DT_LNK) {
      struct stat st;
      if (fstatat(dirfd, e->d_name, &st, t == DT_LNK ? 0 : AT_SYMLINK_NOFOLLOW) != 0) continue;
      t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (t == DT_DIR) {
      if (depth >= 48) continue;
      int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) walk(fd, depth + 1);
    } else if (t == DT_REG) {
      size_t n = strlen(e->d_name);
      files++;
      if (ends_with(e->d_name, n, ".rb") || ends_with(e->d_name, n, ".so")) loadable++;
    }
  }
  closedir(d);
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: walk ROOTS_FILE REPS\n"); return 2; }
  FILE *f = fopen(argv[1], "r");
  if (!f) { perror(argv[1]); return 1; }
  char **roots = NULL, line[4096];
  size_t nroots = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!*line) continue;
    roots = realloc(roots, (nroots + 1) * sizeof *roots);
    roots[nroots++] = strdup(line);
  }
  fclose(f);
  int reps = atoi(argv[2]);
  for (int r = 0; r < reps; r++) {
    struct timespec a, b;
    files = loadable = dirs = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (size_t i = 0; i < nroots; i++) {
      int fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) walk(fd, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    long long ns = (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    printf("%lld %ld %ld %ld\n", ns, files, loadable, dirs);
  }
  return 0;
}
