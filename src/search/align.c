/*
 * align.c - copied segments between two files from frame matches (align.h).
 */
#include "search/align.h"

#include <math.h>
#include <stdlib.h>

#include "core/mem.h"
#include "core/vecmath.h"

#define MAX_LINES  8    /* lines looked for between two files */
#define SPEED_LO   0.90 /* speeds b may run at against a (b's seconds per a's) */
#define SPEED_STEP 0.01
#define N_SPEEDS   21 /* SPEED_LO + SPEED_STEP x k */
/* A fitted speed this close to 1 is 1: matched frames' times scatter by a frame or so, which
 * over a few seconds tilts a fit by up to three percent; speed changes made on purpose (PAL's 4%)
 * are larger. */
#define SPEED_SNAP    0.03
#define REFINE_ROUNDS 4    /* fits of a line to its matches, the last snapping to 1 */
#define CANDIDATE_GAP 0.15 /* a candidate's estimate may be this far below min_similarity */
#define MIN_FRAMES    3    /* matched frames a segment needs, whatever its duration */
/* Inside a run of matches, a frame this far below min_similarity on the line (its counterpart
 * still the best near it) is evidence that carries the run across: a patch of sound straddling
 * a change, a frame blurred by re-encoding. It never starts or ends a segment. */
#define BRIDGE_GAP       0.15
#define MIN_DENSITY      0.5 /* of a segment's frames (not flat) that must match */
#define OTHER_SPEED_VOTE 1.5 /* how much more vote another speed than 1 needs */
/* A frame's counterpart must be the best match near the line: no frame PEAK_S seconds away, in a
 * or in b, may match it better by more than PEAK_SLACK. Within a slow pan a shifted line finds
 * similar frames too, but the frames nearer the true counterpart match better. */
#define PEAK_S     2.0
#define PEAK_SLACK 0.01

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The usual interval between f's frames: the median gap (1 s for a single frame). */
static double frame_step(const vfi_align_file *f, double *scratch)
{
    if (f->n < 2)
        return 1.0;
    for (int64_t i = 1; i < f->n; i++)
        scratch[i - 1] = f->t[i] - f->t[i - 1];
    qsort(scratch, (size_t)(f->n - 1), sizeof(double), cmp_double);
    double m = scratch[(f->n - 1) / 2];
    return m > 1e-3 ? m : 1e-3;
}

/* The first frame of f at or after time x. */
static int64_t first_at(const vfi_align_file *f, double x)
{
    int64_t lo = 0, hi = f->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (f->t[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct vote {
    double offset;
    float sim;
} vote;

static int cmp_vote(const void *x, const void *y)
{
    return cmp_double(&((const vote *)x)->offset, &((const vote *)y)->offset);
}

/* The window of width `width` of offsets (b's time - r x a's time) whose candidates' estimates
 * add up to most: its sum (0: none of MIN_FRAMES) and median offset. */
static double best_offset(const vfi_align_file *a, const vfi_align_file *b, const vfi_align_hit *h,
                          int64_t n, double r, double width, vote *v, double *offset)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (vote){b->t[h[i].b] - r * a->t[h[i].a], h[i].sim};
    qsort(v, (size_t)n, sizeof(*v), cmp_vote);
    double sum = 0, best = 0;
    for (int64_t lo = 0, hi = 0; hi < n; hi++) {
        sum += v[hi].sim;
        while (v[hi].offset - v[lo].offset > width)
            sum -= v[lo++].sim;
        if (sum > best && hi - lo + 1 >= MIN_FRAMES) {
            best = sum;
            *offset = v[lo + (hi - lo) / 2].offset;
        }
    }
    return best;
}

/* The line with most evidence among the n candidates. Copies nearly always keep their speed (true
 * timestamps survive a frame-rate change), and within one shot a slightly wrong speed collects
 * votes too: another speed is taken only with a clearly larger vote. *score 0: none. */
static void best_line(const vfi_align_file *a, const vfi_align_file *b, const vfi_align_hit *h,
                      int64_t n, double width, vote *v, double *speed, double *offset,
                      double *score)
{
    *speed = 1.0;
    *score = best_offset(a, b, h, n, 1.0, width, v, offset);
    double other = 0, r_other = 1.0, o_other = 0.0;
    for (int k = 0; k < N_SPEEDS; k++) {
        double r = SPEED_LO + SPEED_STEP * k, o = 0.0;
        if (fabs(r - 1.0) < 1e-9)
            continue;
        double sum = best_offset(a, b, h, n, r, width, v, &o);
        if (sum > other) {
            other = sum;
            r_other = r;
            o_other = o;
        }
    }
    if (other > OTHER_SPEED_VOTE * *score) {
        *score = other;
        *speed = r_other;
        *offset = o_other;
    }
}

/* The frame of f nearest time x, or -1 outside f's time (more than tol from its ends). */
static int64_t nearest(const vfi_align_file *f, double x, double tol)
{
    if (!f->n || x < f->t[0] - tol || x > f->t[f->n - 1] + tol)
        return -1;
    int64_t j = first_at(f, x);
    if (j == f->n || (j > 0 && x - f->t[j - 1] < f->t[j] - x))
        j--;
    return j;
}

/* A least-squares line through matched frames' times: the line they show (the vote's grid is
 * coarser than the frames' times tell). */
typedef struct fit {
    double n, x, y, xx, xy;
} fit;

static void fit_add(fit *f, double x, double y)
{
    f->n++;
    f->x += x;
    f->y += y;
    f->xx += x * x;
    f->xy += x * y;
}

static double fit_slope(const fit *f, double fallback)
{
    double d = f->n * f->xx - f->x * f->x;
    return f->n >= 2 && d > 1e-9 ? (f->n * f->xy - f->x * f->y) / d : fallback;
}

/* Is frame i of a with frame j of b (cosine s) a peak: no frame PEAK_S away on either side, in
 * either file, matching the other better by more than PEAK_SLACK? */
static int is_peak(const vfi_align_file *a, const vfi_align_file *b, int dim, int64_t i, int64_t j,
                   double s, double tol)
{
    for (int side = -1; side <= 1; side += 2) {
        int64_t k = nearest(b, b->t[j] + side * PEAK_S, tol);
        if (k >= 0 && k != j && !(b->flat && b->flat[k]) &&
            vfi_dot(a->vec + i * dim, b->vec + k * dim, dim) > s + PEAK_SLACK)
            return 0;
        k = nearest(a, a->t[i] + side * PEAK_S, tol);
        if (k >= 0 && k != i && !(a->flat && a->flat[k]) &&
            vfi_dot(a->vec + k * dim, b->vec + j * dim, dim) > s + PEAK_SLACK)
            return 0;
    }
    return 1;
}

/* Each frame of a against b's frames within tol of the time the line (speed r, offset off)
 * gives: sim[i] the best cosine (below min_similarity where it is no match: none there, flat, or
 * a better counterpart off the line), partner[i] that frame of b. */
static void walk(const vfi_align_file *a, const vfi_align_file *b, const vfi_align_opts *o,
                 double r, double off, double tol, float *sim, int64_t *partner)
{
    for (int64_t i = 0; i < a->n; i++) {
        sim[i] = -2.0f;
        partner[i] = -1;
        if (a->flat && a->flat[i])
            continue;
        double want = r * a->t[i] + off;
        for (int64_t j = first_at(b, want - tol); j < b->n && b->t[j] <= want + tol; j++) {
            if (b->flat && b->flat[j])
                continue;
            float s = (float)vfi_dot(a->vec + i * o->dim, b->vec + j * o->dim, o->dim);
            if (s > sim[i]) {
                sim[i] = s;
                partner[i] = j;
            }
        }
        if (sim[i] >= o->min_similarity && !is_peak(a, b, o->dim, i, partner[i], sim[i], tol))
            sim[i] = -1.0f; /* a better counterpart lies off the line */
    }
}

/* Is y, found after x, x's footage again rather than a copy of its own? It shares most of its
 * time in a (or b) with x, and its time in b (or a) overlaps x's or lies within PEAK_S of it: a
 * line shifted within a shot that changes slowly. A clip that b shows twice shares a's time
 * with two segments whose times in b lie apart. */
static int same_copy(const vfi_segment *x, const vfi_segment *y)
{
    double a = fmin(x->a_end, y->a_end) - fmax(x->a_start, y->a_start);
    double b = fmin(x->b_end, y->b_end) - fmax(x->b_start, y->b_start);
    int in_a = a >= 0.5 * (y->a_end - y->a_start), in_b = b >= 0.5 * (y->b_end - y->b_start);
    return (in_a && b > -PEAK_S) || (in_b && a > -PEAK_S);
}

static int cmp_segment(const void *x, const void *y)
{
    return cmp_double(&((const vfi_segment *)x)->a_start, &((const vfi_segment *)y)->a_start);
}

/* Pieces of one copy that lines found apart (a stretch cut short by a dropped second, a run the
 * line lost and a shifted line took up) as the one span a person names: in a's time order, a
 * piece that follows another at the same speed, its start in a and in b within `gap` of where the
 * other ends (overlap included), and its offset within `gap` of the other's, joins it. */
static int join_pieces(vfi_segment *s, int n, double gap)
{
    qsort(s, (size_t)n, sizeof(*s), cmp_segment);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        vfi_segment *p = kept ? &s[kept - 1] : NULL;
        const vfi_segment *q = &s[i];
        double off_p = p ? p->b_start - p->speed * p->a_start : 0;
        double off_q = q->b_start - q->speed * q->a_start;
        if (p && fabs(p->speed - q->speed) < 1e-6 && q->a_start - p->a_end <= gap &&
            q->b_start - p->b_end <= gap && q->b_end > p->b_start && fabs(off_q - off_p) <= gap) {
            double w = (double)p->frames + (double)q->frames;
            p->score = (p->score * (double)p->frames + q->score * (double)q->frames) / w;
            p->frames += q->frames;
            p->a_end = fmax(p->a_end, q->a_end);
            p->b_end = fmax(p->b_end, q->b_end);
            p->b_start = fmin(p->b_start, q->b_start);
            continue;
        }
        s[kept++] = *q;
    }
    return kept;
}

vf_status vfi_align(const vfi_align_file *a, const vfi_align_file *b, vfi_align_hit *hits,
                    int64_t n, const vfi_align_opts *o, vfi_segment *out, int max_out, int *n_out,
                    vf_err *err)
{
    *n_out = 0;
    int64_t most = a->n > b->n ? a->n : b->n;
    double *scratch = vfi_mallocarray((size_t)(most > n ? most : n) + 1, sizeof(double));
    vote *votes = vfi_mallocarray((size_t)n + 1, sizeof(*votes));
    float *sim = vfi_mallocarray((size_t)a->n + 1, sizeof(float));
    int64_t *partner = vfi_mallocarray((size_t)a->n + 1, sizeof(int64_t));
    vf_status rc = VF_OK;
    if (!scratch || !votes || !sim || !partner) {
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
        goto done;
    }
    double step_a = frame_step(a, scratch), step_b = frame_step(b, scratch);
    /* b's frame for a time: the best within tol of it (a frame-rate change moves frames) */
    double tol = fmax(0.3, 0.75 * step_b);
    double gap = fmax(2.0, 3.0 * step_a); /* frames of a segment may miss for this long */
    /* the candidates that can count: in range, not flat, close enough */
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        vfi_align_hit h = hits[i];
        if (h.a < 0 || h.a >= a->n || h.b < 0 || h.b >= b->n ||
            h.sim < o->min_similarity - CANDIDATE_GAP || (a->flat && a->flat[h.a]) ||
            (b->flat && b->flat[h.b]))
            continue;
        hits[m++] = h;
    }
    for (int line = 0; line < MAX_LINES && m >= MIN_FRAMES && *n_out < max_out; line++) {
        double r = 1.0, off = 0.0, score;
        best_line(a, b, hits, m, 2.0 * tol, votes, &r, &off, &score);
        if (score <= 0)
            break;
        /* along the line, then along the line its matches show (the vote's grid is coarse;
         * each walk finds the frames nearer the true line), speeds near 1 taken as 1 */
        double r0 = r, off0 = off;
        walk(a, b, o, r, off, tol, sim, partner);
        for (int round = 0; round < REFINE_ROUNDS; round++) {
            fit along = {0};
            for (int64_t i = 0; i < a->n; i++)
                if (sim[i] >= o->min_similarity)
                    fit_add(&along, a->t[i], b->t[partner[i]]);
            double r2 = fit_slope(&along, r);
            int last = round == REFINE_ROUNDS - 1 || fabs(r2 - r) < 1e-4;
            if (last && fabs(r2 - 1.0) < SPEED_SNAP)
                r2 = 1.0;
            if (along.n < MIN_FRAMES || r2 < SPEED_LO || r2 > 2.0 - SPEED_LO)
                break;
            double off2 = (along.y - r2 * along.x) / along.n;
            if (fabs(r2 - r) < 1e-4 && fabs(off2 - off) < 1e-3)
                break;
            r = r2;
            off = off2;
            walk(a, b, o, r, off, tol, sim, partner);
            if (last)
                break;
        }
        /* runs of matching frames, gaps of at most `gap` (between matches, or frames nearly
         * matching that bridge: BRIDGE_GAP), most of their frames matching; a run starts and
         * ends at a match */
        const double bridge = o->min_similarity - BRIDGE_GAP;
        const double reach = gap + 0.25 * step_a; /* the times' rounding never decides */
        for (int64_t i = 0; i < a->n && *n_out < max_out;) {
            if (sim[i] < o->min_similarity) {
                i++;
                continue;
            }
            int64_t first = i, last = i, held = i, matched = 1, evidence = 1, bridged = 0;
            double total = sim[i], bridged_total = 0;
            for (int64_t j = i + 1; j < a->n && a->t[j] - a->t[held] <= reach; j++) {
                if (a->flat && a->flat[j])
                    continue;
                evidence++;
                if (sim[j] >= o->min_similarity) {
                    last = held = j;
                    matched += 1 + bridged; /* the bridge is the segment's now */
                    total += sim[j] + bridged_total;
                    bridged = 0;
                    bridged_total = 0;
                } else if (sim[j] >= bridge) {
                    held = j; /* carries the run on, counted if a match follows */
                    bridged++;
                    bridged_total += sim[j];
                }
            }
            /* frames counted past the last match are not the segment's */
            for (int64_t j = last + 1; j < a->n && a->t[j] - a->t[held] <= reach; j++)
                if (!(a->flat && a->flat[j]))
                    evidence--;
            i = last + 1;
            vfi_segment seg = {a->t[first],
                               a->t[last],
                               b->t[partner[first]],
                               b->t[partner[last]],
                               total / (double)matched,
                               r,
                               matched};
            if (matched < MIN_FRAMES || matched < MIN_DENSITY * (double)evidence ||
                seg.a_end - seg.a_start + step_a < o->min_duration)
                continue;
            int dup = 0;
            for (int k = 0; k < *n_out && !dup; k++)
                dup = same_copy(&out[k], &seg);
            if (!dup)
                out[(*n_out)++] = seg;
        }
        /* the line's candidates (as voted and as fitted) are spent: the next line is another */
        int64_t kept = 0;
        for (int64_t i = 0; i < m; i++) {
            double ta = a->t[hits[i].a], tb = b->t[hits[i].b];
            if (fabs(tb - (r * ta + off)) > 2.0 * tol && fabs(tb - (r0 * ta + off0)) > 2.0 * tol)
                hits[kept++] = hits[i];
        }
        if (kept == m)
            break;
        m = kept;
    }
    *n_out = join_pieces(out, *n_out, gap);
done:
    vfi_free(scratch);
    vfi_free(votes);
    vfi_free(sim);
    vfi_free(partner);
    return rc;
}
