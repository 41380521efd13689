/* test_nvml_rate.c - the interconnect's numbers of rt_nvml.c without a GPU.
 *
 * test_nvml_rate: the rate of a cumulative KiB counter (rt_nvml_counter_rate)
 * on hand-worked readings, and the windows of rt_nvml_rate_add (a reading
 * sooner than the window changes nothing, a counter that went back or a
 * failed reading leaves the rate unknown).
 *
 * test_nvml_rate --fake: rt_nvml_open and rt_nvml_sample through
 * fake_nvml.c's libnvidia-ml.so.1 (found through LD_LIBRARY_PATH): PCIe read
 * at once and then at most once a second, NVLink's rate after a second of
 * counting (12,300 and 11,900 MB/s, within 5% for the clock's jitter), a
 * driver's reset and unsupported fields unknown.  Sleeps about 3.3 s. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "rt_nvml.h"

#define KIB_PER_GB (1e9 / 1024) /* 976,562.5 KiB make 1,000 MB */

static void check_counter_rate(void) {
  CHECK_CLOSE(rt_nvml_counter_rate(0, 0, 976563, 1), 1000.000512, 1e-12, "976,563 KiB in 1 s");
  CHECK_CLOSE(rt_nvml_counter_rate(1000, 10, 1000 + 2 * 976563, 12), 1000.000512, 1e-12, "the same over 2 s");
  CHECK_CLOSE(rt_nvml_counter_rate(5, 3.5, 5, 4.75), 0, 0, "nothing sent");
  /* 450 GB/s, an H100's NVLink, for a day: well inside 64 bits, exact in double */
  unsigned long long day = (unsigned long long)(450 * KIB_PER_GB * 86400);
  CHECK_CLOSE(rt_nvml_counter_rate(1ull << 40, 100, (1ull << 40) + day, 86500), 450e3, 1e-9, "a day at 450 GB/s");
  CHECK(rt_nvml_counter_rate(100, 1, 99, 2) == -1, "a counter that went back has a rate");
  CHECK(rt_nvml_counter_rate(100, 2, 200, 2) == -1, "no time between two readings has a rate");
  CHECK(rt_nvml_counter_rate(100, 3, 200, 2) == -1, "readings out of order have a rate");
}

static void check_rate_windows(void) {
  RtNvmlRate r = RT_NVML_RATE_NONE;
  CHECK(r.t < 0 && r.mb_s < 0, "RT_NVML_RATE_NONE knows something");
  CHECK(rt_nvml_rate_add(&r, 1000, 50.0, 1.0) == -1, "one reading has a rate");
  /* steps a few milliseconds apart: the window stays open */
  CHECK(rt_nvml_rate_add(&r, 1000 + 9766, 50.01, 1.0) == -1, "10 ms closed a 1 s window");
  CHECK(rt_nvml_rate_add(&r, 1000 + 97656, 50.999, 1.0) == -1, "999 ms closed a 1 s window");
  CHECK(r.kib == 1000 && r.t == 50.0, "a reading inside the window moved its start");
  /* a second after its start, the window closes: 976,563 KiB in 1.25 s */
  CHECK_CLOSE(rt_nvml_rate_add(&r, 1000 + 976563, 51.25, 1.0), 800.0004096, 1e-12, "the first window");
  CHECK(r.kib == 1000 + 976563 && r.t == 51.25, "the next window does not start at the closing reading");
  CHECK_CLOSE(rt_nvml_rate_add(&r, 1000 + 976563 + 5, 51.5, 1.0), 800.0004096, 1e-12, "inside the next window");
  CHECK_CLOSE(rt_nvml_rate_add(&r, 1000 + 976563 + 2 * 976563, 53.25, 1.0), 1000.000512, 1e-12, "the second window");
  /* the driver reset its counters: that window is unknown, the next is not */
  CHECK(rt_nvml_rate_add(&r, 10, 54.5, 1.0) == -1, "a counter that went back has a rate");
  CHECK_CLOSE(rt_nvml_rate_add(&r, 10 + 976563, 55.5, 1.0), 1000.000512, 1e-12, "the window after a reset");
  /* a window of 0 makes a rate of every reading */
  RtNvmlRate every = RT_NVML_RATE_NONE;
  rt_nvml_rate_add(&every, 0, 1.0, 0);
  CHECK_CLOSE(rt_nvml_rate_add(&every, 976563, 2.0, 0), 1000.000512, 1e-12, "a window of 0");
  CHECK(rt_nvml_rate_add(&every, 976563, 2.0, 0) == -1, "two readings at one time have a rate");
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void check_fake(void) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  void (*set)(int, int, int) = lib ? (void (*)(int, int, int))dlsym(lib, "fake_nvml_set") : NULL;
  void (*stats)(int *, int *) = lib ? (void (*)(int *, int *))dlsym(lib, "fake_nvml_stats") : NULL;
  CHECK(set && stats, "libnvidia-ml.so.1 is not the fake (LD_LIBRARY_PATH should name its folder)");
  if (!set || !stats) return;
  int pcie_calls = 0, bad = 0;
  set(1, 1, 0);
  RtNvml *n = NULL;
  char why[512] = "";
  CHECK(rt_nvml_open(NULL, &n, why, sizeof why) == 0 && n, "the fake does not open: %s", why);
  if (!n) return;
  RtNvmlSample s;
  /* PCIe at once; NVLink, one reading, no rate yet; no power, clock or ECC */
  CHECK(rt_nvml_sample(n, &s) == 0, "nothing read");
  CHECK_CLOSE(s.pcie_tx_mb_s, 102.4, 1e-12, "PCIe TX (100,000 KB/s)");
  CHECK_CLOSE(s.pcie_rx_mb_s, 204.8, 1e-12, "PCIe RX (200,000 KB/s)");
  CHECK(s.nvlink_tx_mb_s == -1 && s.nvlink_rx_mb_s == -1, "a first NVLink reading has a rate: %g/%g", s.nvlink_tx_mb_s,
        s.nvlink_rx_mb_s);
  CHECK(s.power_w < 0 && s.sm_clock_mhz < 0 && s.temp_c < 0 && !s.have_ecc, "the fake has no power, clock or ECC");
  stats(&pcie_calls, &bad);
  CHECK(pcie_calls == 2, "%d calls of nvmlDeviceGetPcieThroughput for TX and RX", pcie_calls);
  /* a step later: PCIe repeated, not asked again (each asking takes 20 ms) */
  rt_nvml_sample(n, &s);
  stats(&pcie_calls, &bad);
  CHECK(pcie_calls == 2 && s.pcie_tx_mb_s > 102 && s.nvlink_tx_mb_s == -1,
        "a step later: %d PCIe calls, PCIe %g, NVLink %g", pcie_calls, s.pcie_tx_mb_s, s.nvlink_tx_mb_s);
  /* past the window: NVLink's rate, PCIe asked again */
  sleep_s(1.1);
  rt_nvml_sample(n, &s);
  stats(&pcie_calls, &bad);
  CHECK(pcie_calls == 4, "%d PCIe calls after a second", pcie_calls);
  CHECK_CLOSE(s.nvlink_tx_mb_s, 12300, 0.05, "NVLink TX after a second");
  CHECK_CLOSE(s.nvlink_rx_mb_s, 11900, 0.05, "NVLink RX after a second");
  double tx = s.nvlink_tx_mb_s;
  rt_nvml_sample(n, &s);
  CHECK(s.nvlink_tx_mb_s == tx, "a step later the rate moved: %g, was %g", s.nvlink_tx_mb_s, tx);
  /* the driver reset its counters: the window across it is unknown, the next known */
  set(1, 1, 1);
  sleep_s(1.1);
  rt_nvml_sample(n, &s);
  CHECK(s.nvlink_tx_mb_s == -1 && s.nvlink_rx_mb_s == -1, "a window across a reset: %g/%g", s.nvlink_tx_mb_s,
        s.nvlink_rx_mb_s);
  sleep_s(1.1);
  rt_nvml_sample(n, &s);
  CHECK_CLOSE(s.nvlink_tx_mb_s, 12300, 0.05, "NVLink TX a window after the reset");
  /* the fields refused (their own nvmlReturn): unknown at once; PCIe's last reading stands out its second */
  set(0, 0, 0);
  rt_nvml_sample(n, &s);
  CHECK(s.nvlink_tx_mb_s == -1 && s.nvlink_rx_mb_s == -1, "refused fields have a rate: %g/%g", s.nvlink_tx_mb_s,
        s.nvlink_rx_mb_s);
  CHECK_CLOSE(s.pcie_rx_mb_s, 204.8, 1e-12, "PCIe within its second");
  /* a new handle on a GPU without either: nothing known, nothing read */
  RtNvml *n2 = NULL;
  CHECK(rt_nvml_open(NULL, &n2, why, sizeof why) == 0 && n2, "a second handle does not open: %s", why);
  CHECK(rt_nvml_sample(n2, &s) == -1, "a GPU with nothing to read read something");
  CHECK(s.pcie_tx_mb_s == -1 && s.pcie_rx_mb_s == -1 && s.nvlink_tx_mb_s == -1 && s.nvlink_rx_mb_s == -1,
        "unsupported PCIe and NVLink: %g/%g, %g/%g", s.pcie_tx_mb_s, s.pcie_rx_mb_s, s.nvlink_tx_mb_s,
        s.nvlink_rx_mb_s);
  /* a watched handle: sampled every 50 ms on a thread of its own (PCIe
   * still once a second), read at once without NVML */
  set(1, 1, 0);
  RtNvml *n3 = NULL;
  CHECK(rt_nvml_open(NULL, &n3, why, sizeof why) == 0 && n3, "a third handle does not open: %s", why);
  int before = 0, watched = 0, later = 0;
  stats(&before, &bad);
  CHECK(n3 && rt_nvml_watch(n3, 0.05) == 0, "the watcher does not start");
  CHECK(rt_nvml_watch(n3, 0.05) == -1 && rt_nvml_watch(n2, 0) == -1, "a handle watched twice, or every 0 s");
  stats(&watched, &bad);
  CHECK(watched == before + 2, "the first sample is not taken at once: %d PCIe calls", watched - before);
  CHECK(rt_nvml_sample(n3, &s) == 0, "the watched handle's first sample");
  CHECK_CLOSE(s.pcie_tx_mb_s, 102.4, 1e-12, "PCIe TX of the watched handle");
  sleep_s(1.3);
  stats(&later, &bad);
  CHECK(later == watched + 2, "the watcher read PCIe %d times in 1.3 s (once a second)", (later - watched) / 2);
  CHECK(rt_nvml_sample(n3, &s) == 0, "the watched handle after 1.3 s");
  CHECK_CLOSE(s.nvlink_tx_mb_s, 12300, 0.05, "NVLink TX from the watcher's window");
  for (int i = 0; i < 1000; i++) rt_nvml_sample(n3, &s);
  stats(&pcie_calls, &bad);
  CHECK(pcie_calls == later, "1000 reads of a watched handle called NVML's PCIe %d times", pcie_calls - later);
  rt_nvml_close(n3);
  stats(&pcie_calls, &bad);
  CHECK(bad == 0, "%d fields asked for another id than 138/139 or another scope than UINT_MAX", bad);
  rt_nvml_close(n2);
  rt_nvml_close(n);
  dlclose(lib);
}

int main(int argc, char **argv) {
  check_counter_rate();
  check_rate_windows();
  if (argc > 1 && strcmp(argv[1], "--fake") == 0) check_fake();
  return check_report();
}
