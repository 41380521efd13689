/* cg_prog.c - every node's kernels, deduplicated, as a few NVRTC
 * programs compiled concurrently, with a cubin cache on disk (cg_prog.h
 * gives the contract).
 *
 * The emitter (cg_kernels.c) writes each launch of a node as
 * "namespace netc_k<node>_<j> {" + the instantiated template + "}" + an
 * #undef of each parameter; a node's source is cut at those openings into
 * one unit per launch.  A node whose source does not cut that way stays
 * one unit (its launches share the unit's fate).  A unit's key is its text
 * with its kernel names and namespace names replaced by placeholders, plus
 * the launches' shared memory; units with equal keys compile to the same
 * code, so only the first of them is compiled.
 *
 * In a program each unit is followed by an #undef of every macro it
 * defined, and a whole-node unit is wrapped in a namespace of its own, so
 * two instantiations of a template (same helper names, same #define
 * parameters, same include guard) live side by side in one translation
 * unit; the kernels are extern "C", so their symbols stay the plain names.
 * The joined text of all nodes (CgProg.source) is built the same way,
 * per node, for --emit-cuda.
 *
 * Each part is compiled through cg_cache.h (the one compile-and-cache
 * path), as <dir>/netc-step-<key>.cubin. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "cg_prog.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg_cache.h"
#include "cg_nvrtc.h"
#include "cg_text.h"

/* distinct kernels per part at least: fewer, smaller programs for small graphs */
enum { KERNELS_PER_PART = 4 };

/* Appends "#undef NAME" for every "#define NAME" line of src. */
static int undef_macros(CgText *b, const char *src) {
  for (const char *l = src; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    const char *p = l;
    while (*p == ' ' || *p == '\t') p++;
    if (*p++ != '#') continue;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, "define", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) continue;
    p += 6;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = 0;
    while (p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
           (n && p[n] >= '0' && p[n] <= '9'))
      n++;
    if (n && (cg_text_add(b, "#undef ", 7) || cg_text_add(b, p, n) || cg_text_add(b, "\n", 1))) return -1;
  }
  return 0;
}

/* The program text of every node's source into *b (--emit-cuda's text). */
static CgStatus assemble(const IrGraph *g, int64_t batch, CgProg *p, CgText *b, char *err, size_t errlen) {
  if (cg_text_printf(b, "/* netc: graph %s at batch %lld, %d nodes */\n", g->name ? g->name : "?", (long long)batch,
                     g->nnode))
    return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (program text)");
  for (int i = 0; i < p->nnode; i++) {
    const char *src = p->kn[i].source;
    if (!src || !*src) continue;
    const IrOpInfo *info = ir_op_info(g->node[i].op);
    if (cg_text_printf(b, "\n/* node %d: %s %s */\nnamespace netc_node%d {\n", i, info ? info->name : "?",
                       g->node[i].name ? g->node[i].name : "", i) ||
        cg_text_add(b, src, strlen(src)) || cg_text_printf(b, "\n} /* namespace netc_node%d */\n", i) ||
        undef_macros(b, src))
      return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (program text)");
  }
  return CG_OK;
}

/* --- distinct kernels ------------------------------------------------------ */

/* A piece of one node's source: launch `launch`, or all of it (launch -1). */
typedef struct Unit {
  int node, launch;
  const char *text;
  size_t len;
  char *key; /* the text without its names, then the shared memory of its launches */
  size_t key_len;
  uint64_t hash;
  int canon; /* the first unit with the same key (itself when distinct) */
  int part;
} Unit;

/* Cuts node i's source at its launches' namespace openings into at[0..n];
 * 0 when it does not cut that way, or a piece lacks its launch's kernel. */
static int cut_node(const CgKNode *k, int node, size_t at[CG_K_MAX_LAUNCH + 1]) {
  if (k->nlaunch < 1) return 0;
  const char *from = k->source;
  for (int j = 0; j < k->nlaunch; j++) {
    char open[64];
    snprintf(open, sizeof open, "namespace netc_k%d_%d {\n", node, j);
    const char *m = strstr(from, open);
    if (!m || (j == 0 && m != k->source)) return 0;
    at[j] = (size_t)(m - k->source);
    from = m + 1;
  }
  at[k->nlaunch] = strlen(k->source);
  for (int j = 0; j < k->nlaunch; j++) { /* each piece holds its launch's kernel */
    const char *name = k->launch[j].name, *m = strstr(k->source + at[j], name);
    if (!*name || !m || m + strlen(name) > k->source + at[j + 1]) return 0;
  }
  return 1;
}

static int ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* u->key: u's text with every identifier in names[] replaced by "\1" and a
 * letter for its index, then each of its launches' shared memory. */
static int make_key(Unit *u, const CgKNode *k, const char *const *names, int nnames) {
  CgText b = {0};
  const char *s = u->text;
  size_t i = 0, n = u->len, plain = 0;
  while (i < n) {
    if (!ident_char(s[i]) || (s[i] >= '0' && s[i] <= '9') || (i && ident_char(s[i - 1]))) {
      i++;
      continue;
    }
    size_t m = 1;
    while (i + m < n && ident_char(s[i + m])) m++;
    for (int x = 0; x < nnames; x++) {
      if (strlen(names[x]) != m || memcmp(names[x], s + i, m) != 0) continue;
      char ph[3] = {1, (char)('A' + x), 0};
      if (cg_text_add(&b, s + plain, i - plain) || cg_text_add(&b, ph, 2)) goto oom;
      plain = i + m;
      break;
    }
    i += m;
  }
  if (cg_text_add(&b, s + plain, n - plain)) goto oom;
  for (int j = u->launch < 0 ? 0 : u->launch; j < (u->launch < 0 ? k->nlaunch : u->launch + 1); j++)
    if (cg_text_printf(&b, "\2smem %u", k->launch[j].smem)) goto oom;
  if (!b.p && cg_text_add(&b, "", 0)) goto oom;
  u->key = b.p, u->key_len = b.len;
  u->hash = cg_fnv1a(CG_FNV1A_INIT, b.p, b.len);
  return 0;
oom:
  free(b.p);
  return -1;
}

/* Every node's units, in node and launch order, keyed. */
static int list_units(const CgProg *p, Unit **out, int *nout) {
  int cap = 0;
  for (int i = 0; i < p->nnode; i++) cap += p->kn[i].nlaunch > 0 ? p->kn[i].nlaunch : 1;
  Unit *u = calloc((size_t)cap + 1, sizeof *u);
  if (!u) return -1;
  int n = 0;
  for (int i = 0; i < p->nnode; i++) {
    const CgKNode *k = &p->kn[i];
    if (!k->source || !*k->source) continue;
    size_t at[CG_K_MAX_LAUNCH + 1];
    int cut = cut_node(k, i, at);
    char ns[CG_K_MAX_LAUNCH][32];
    const char *names[2 * CG_K_MAX_LAUNCH];
    for (int j = 0; j < k->nlaunch; j++) snprintf(ns[j], sizeof ns[j], "netc_k%d_%d", i, j);
    for (int j = 0; j < (cut ? k->nlaunch : 1); j++) {
      Unit *x = &u[n];
      x->node = i, x->launch = cut ? j : -1, x->canon = n, x->part = -1;
      x->text = k->source + (cut ? at[j] : 0);
      x->len = cut ? at[j + 1] - at[j] : strlen(k->source);
      int nn = 0;
      for (int l = cut ? j : 0; l < (cut ? j + 1 : k->nlaunch); l++) names[nn++] = k->launch[l].name;
      for (int l = cut ? j : 0; l < (cut ? j + 1 : k->nlaunch); l++) names[nn++] = ns[l];
      if (make_key(x, k, names, nn)) {
        for (int y = 0; y < n; y++) free(u[y].key);
        free(u);
        return -1;
      }
      n++;
    }
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < a; b++)
      if (u[b].canon == b && u[b].hash == u[a].hash && u[b].key_len == u[a].key_len &&
          memcmp(u[b].key, u[a].key, u[a].key_len) == 0 && (u[a].launch < 0) == (u[b].launch < 0) &&
          (u[a].launch >= 0 || p->kn[u[a].node].nlaunch == p->kn[u[b].node].nlaunch)) {
        u[a].canon = b;
        break;
      }
  *out = u, *nout = n;
  return 0;
}

static void free_units(Unit *u, int n) {
  for (int i = 0; u && i < n; i++) free(u[i].key);
  free(u);
}

/* Deals the distinct units, largest first, each to the lightest part (the
 * lowest on ties); the count of parts follows from the count of units. */
static void deal(Unit *u, int n, int ndistinct, int *npart) {
  int np = (ndistinct + KERNELS_PER_PART - 1) / KERNELS_PER_PART;
  if (np > CG_MAX_PART) np = CG_MAX_PART;
  size_t load[CG_MAX_PART] = {0};
  for (int dealt = 0; dealt < ndistinct; dealt++) {
    int big = -1;
    for (int i = 0; i < n; i++)
      if (u[i].canon == i && u[i].part < 0 && (big < 0 || u[i].len > u[big].len)) big = i;
    int light = 0;
    for (int k = 1; k < np; k++)
      if (load[k] < load[light]) light = k;
    u[big].part = light;
    load[light] += u[big].len;
  }
  *npart = np;
}

/* The text of part k: its units in node order. */
static int part_text(const IrGraph *g, int64_t batch, const Unit *u, int n, int k, CgProg *p) {
  CgText b = {0};
  int rc = cg_text_printf(&b, "/* netc: graph %s at batch %lld, kernel program %d of %d */\n", g->name ? g->name : "?",
                          (long long)batch, k + 1, p->npart);
  for (int i = 0; i < n && !rc; i++) {
    if (u[i].canon != i || u[i].part != k) continue;
    const IrNode *nd = &g->node[u[i].node];
    const IrOpInfo *info = ir_op_info(nd->op);
    rc = cg_text_printf(&b, "\n/* node %d: %s %s */\n", u[i].node, info ? info->name : "?", nd->name ? nd->name : "");
    if (!rc && u[i].launch < 0) rc = cg_text_printf(&b, "namespace netc_node%d {\n", u[i].node);
    /* the text of one unit: an undef_macros scan must not run past it */
    char *text = rc ? NULL : strndup(u[i].text, u[i].len);
    rc = rc || !text || cg_text_add(&b, text, u[i].len) ||
         (u[i].launch < 0 && cg_text_printf(&b, "\n} /* namespace netc_node%d */\n", u[i].node)) ||
         undef_macros(&b, text);
    free(text);
    p->part[k].nkernel++;
  }
  if (rc) {
    free(b.p);
    return -1;
  }
  p->part[k].source = b.p, p->part[k].source_len = b.len;
  return 0;
}

/* 1 (with a message) when two distinct kernels have one name: one program
 * could not hold both, and a launch could call the other. */
static int same_name(const CgProg *p, const Unit *u, int n, char *err, size_t errlen) {
  for (int a = 0; a < n; a++)
    for (int b = 0; b < a; b++) {
      if (u[a].canon != a || u[b].canon != b) continue;
      const CgKNode *ka = &p->kn[u[a].node], *kb = &p->kn[u[b].node];
      for (int ja = u[a].launch < 0 ? 0 : u[a].launch; ja < (u[a].launch < 0 ? ka->nlaunch : u[a].launch + 1); ja++)
        for (int jb = u[b].launch < 0 ? 0 : u[b].launch; jb < (u[b].launch < 0 ? kb->nlaunch : u[b].launch + 1); jb++)
          if (strcmp(ka->launch[ja].name, kb->launch[jb].name) == 0) {
            cg_fail(CG_EARG, err, errlen,
                    "cg_prog: kernel name %s is given to two different kernels (node %d launch %d, node %d "
                    "launch %d): each kernel needs a name of its own",
                    ka->launch[ja].name, u[b].node, jb, u[a].node, ja);
            return 1;
          }
    }
  return 0;
}

/* Dedups the emitted launches into sym and the parts' texts. */
static CgStatus make_parts(const IrGraph *g, int64_t batch, CgProg *p, char *err, size_t errlen) {
  p->first = calloc((size_t)p->nnode + 1, sizeof *p->first);
  for (int i = 0; p->first && i < p->nnode; i++) p->first[i + 1] = p->first[i] + p->kn[i].nlaunch;
  p->nlaunch = p->first ? p->first[p->nnode] : 0;
  p->sym = calloc((size_t)p->nlaunch + 1, sizeof *p->sym);
  Unit *u = NULL;
  int n = 0;
  if (!p->first || !p->sym || list_units(p, &u, &n))
    return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (%d kernels)", p->nlaunch);
  for (int i = 0; i < n; i++) p->ndistinct += u[i].canon == i;
  if (same_name(p, u, n, err, errlen)) {
    free_units(u, n);
    return CG_EARG;
  }
  deal(u, n, p->ndistinct, &p->npart);
  for (int i = 0; i < n; i++) {
    const Unit *c = &u[u[i].canon];
    const CgKNode *k = &p->kn[u[i].node];
    for (int j = u[i].launch < 0 ? 0 : u[i].launch; j < (u[i].launch < 0 ? k->nlaunch : u[i].launch + 1); j++) {
      CgProgSym *s = &p->sym[p->first[u[i].node] + j];
      s->part = c->part;
      snprintf(s->name, sizeof s->name, "%s", p->kn[c->node].launch[c->launch < 0 ? j : c->launch].name);
    }
  }
  CgStatus s = CG_OK;
  for (int k = 0; k < p->npart && !s; k++)
    if (part_text(g, batch, u, n, k, p))
      s = cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (program text)");
  free_units(u, n);
  return s;
}

/* --- compiling the parts ---------------------------------------------------- */

typedef struct Job {
  CgProg *p;
  const char *arch, *dir, *opts, *graph;
  int64_t batch;
  pthread_mutex_t mu;
  int next;
  CgStatus status[CG_MAX_PART];
  char *err; /* npart messages of errlen bytes */
  size_t errlen;
} Job;

static CgStatus compile_part(Job *j, int k) {
  CgProgPart *pt = &j->p->part[k];
  char *err = j->err + (size_t)k * j->errlen, name[160];
  snprintf(name, sizeof name, "netc_%s_b%lld_p%d", j->graph, (long long)j->batch, k + 1);
  CgCompile c = {.source = pt->source, .name = name, .arch = j->arch, .kind = "step", .opts = j->opts};
  return cg_cache_compile(&c, j->dir, &pt->cubin, &pt->size, &pt->cache_hit, err, j->errlen);
}

static void *worker(void *arg) {
  Job *j = arg;
  for (;;) {
    pthread_mutex_lock(&j->mu);
    int k = j->next++;
    pthread_mutex_unlock(&j->mu);
    if (k >= j->p->npart) return NULL;
    if (!j->p->part[k].cubin) j->status[k] = compile_part(j, k);
  }
}

/* Threads to compile with: p->threads, else the device options' nvrtc_threads, else the
 * cores this process may use; at most CG_PROG_THREADS and the parts. */
static int thread_count(const CgProg *p, const NetcOpts *o) {
  int n = p->threads;
  if (n <= 0) n = o->nvrtc_threads;
  if (n <= 0) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  }
  if (n > CG_PROG_THREADS) n = CG_PROG_THREADS;
  if (n > p->npart) n = p->npart;
  return n < 1 ? 1 : n;
}

CgStatus cg_prog_compile(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, CgProg *p,
                         char *err, size_t errlen) {
  int todo = 0;
  for (int k = 0; k < p->npart; k++) todo += !p->part[k].cubin;
  if (!todo) return CG_OK;
  char arch[32], dir[4096];
  snprintf(arch, sizeof arch, "sm_%d%d", dev->cc_major, dev->cc_minor);
  int major = 0, minor = 0;
  CgStatus vs = cg_nvrtc_version(&major, &minor, err, errlen);
  if (vs) return vs;
  cg_cache_dir(cache_dir, dir, sizeof dir);
  char key[256];
  opts_code_key(cg_device_opts(dev), key, sizeof key);
  Job j = {.p = p,
           .arch = arch,
           .dir = dir,
           .opts = key,
           .graph = g->name ? g->name : "graph",
           .batch = batch,
           .errlen = errlen ? errlen : 1};
  if (!(j.err = calloc((size_t)p->npart, j.errlen)))
    return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory");
  pthread_mutex_init(&j.mu, NULL);
  pthread_t tid[CG_PROG_THREADS];
  int nthread = thread_count(p, cg_device_opts(dev)), started = 0;
  while (started < nthread - 1 && pthread_create(&tid[started], NULL, worker, &j) == 0) started++;
  worker(&j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  pthread_mutex_destroy(&j.mu);
  CgStatus s = CG_OK;
  int hits = 0;
  for (int k = 0; k < p->npart; k++) {
    hits += p->part[k].cache_hit;
    if (!s && j.status[k]) {
      s = j.status[k];
      if (err && errlen) snprintf(err, errlen, "%s", j.err + (size_t)k * j.errlen);
    }
  }
  free(j.err);
  p->cache_hit = hits == p->npart;
  if (s)
    for (int k = 0; k < p->npart; k++)
      if (!p->part[k].prebuilt) {
        free(p->part[k].cubin);
        p->part[k].cubin = NULL, p->part[k].size = 0, p->part[k].cache_hit = 0;
      }
  return s;
}

/* --- emission and the whole build -------------------------------------------- */

CgStatus cg_prog_emit(const IrGraph *g, int64_t batch, const CgDevice *dev, CgProg *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  if (!g || !dev) return cg_fail(CG_EARG, err, errlen, "cg_prog: no graph or device");
  p->kn = calloc((size_t)(g->nnode ? g->nnode : 1), sizeof *p->kn);
  if (!p->kn) return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (%d nodes)", g->nnode);
  int any = 0;
  for (int i = 0; i < g->nnode; i++) {
    if (cg_kernels_emit(g, i, batch, dev, &p->kn[i], err, errlen)) {
      cg_prog_free(p);
      return CG_EARG;
    }
    p->nnode = i + 1;
    any |= p->kn[i].source && p->kn[i].source[0];
  }
  CgText b = {0};
  CgStatus s = make_parts(g, batch, p, err, errlen);
  if (!s && any) s = assemble(g, batch, p, &b, err, errlen);
  if (s) {
    free(b.p);
    cg_prog_free(p);
    return s;
  }
  p->source = b.p, p->source_len = b.len;
  return CG_OK;
}

CgStatus cg_prog_build_prebuilt(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir,
                                const CgProgram *pre, const char *pre_arch, CgProg *p, char *err, size_t errlen) {
  CgStatus s = cg_prog_emit(g, batch, dev, p, err, errlen);
  if (s || !p->npart) return s;
  char arch[32];
  snprintf(arch, sizeof arch, "sm_%d%d", dev->cc_major, dev->cc_minor);
  /* the launches come from this emission, so a cubin is only usable when it
   * was made from exactly this part's text, for this device's arch */
  int taken = 0;
  char key[256];
  opts_code_key(cg_device_opts(dev), key, sizeof key);
  if (pre && pre->opts && strcmp(pre->opts, key) != 0) pre = NULL; /* made under other code switches */
  for (int k = 0; pre && pre_arch && strcmp(pre_arch, arch) == 0 && k < p->npart && k < pre->npart; k++) {
    CgProgPart *pt = &p->part[k];
    if (!pre->source[k] || !pre->cubin[k] || pre->cubin_size[k] <= 16 || strcmp(pre->source[k], pt->source) != 0)
      continue;
    if (!(pt->cubin = malloc(pre->cubin_size[k]))) {
      cg_prog_free(p);
      return cg_fail(CG_ENOMEM, err, errlen, "cg_prog: out of host memory (%zu-byte cubin)", pre->cubin_size[k]);
    }
    memcpy(pt->cubin, pre->cubin[k], pre->cubin_size[k]);
    pt->size = pre->cubin_size[k], pt->prebuilt = 1;
    taken++;
  }
  p->prebuilt = taken == p->npart;
  s = cg_prog_compile(g, batch, dev, cache_dir, p, err, errlen);
  if (s) cg_prog_free(p);
  return s;
}

CgStatus cg_prog_build(const IrGraph *g, int64_t batch, const CgDevice *dev, const char *cache_dir, CgProg *p,
                       char *err, size_t errlen) {
  return cg_prog_build_prebuilt(g, batch, dev, cache_dir, NULL, NULL, p, err, errlen);
}

const CgProgSym *cg_prog_sym(const CgProg *p, int node, int launch) {
  if (!p || !p->sym || node < 0 || node >= p->nnode || launch < 0 || launch >= p->kn[node].nlaunch) return NULL;
  return &p->sym[p->first[node] + launch];
}

void cg_prog_free(CgProg *p) {
  if (!p) return;
  for (int i = 0; i < p->nnode; i++) cg_kernels_free(&p->kn[i]);
  for (int k = 0; k < CG_MAX_PART; k++) {
    free(p->part[k].cubin);
    free(p->part[k].source);
  }
  free(p->kn);
  free(p->source);
  free(p->first);
  free(p->sym);
  memset(p, 0, sizeof *p);
}
