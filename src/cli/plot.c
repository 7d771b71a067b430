/*
 * plot.c - see plot.h. Layout: title and subtitle on top, the legend under them, a y axis with
 * 1-2-5 ticks from zero, one cluster of bars per group with each bar's value above it.
 */
#include "cli/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/path.h"

#define MAX_SERIES 16
#define MAX_GROUPS 32
#define BAR_W      26
#define BAR_GAP    4
#define GROUP_GAP  28
#define LEFT       72
#define RIGHT      24
#define TOP        96
#define BOTTOM     56
#define PLOT_H     300

/* a colour-blind-safe palette (Okabe-Ito) */
static const char *const colours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                      "#56B4E9", "#D55E00", "#F0E442", "#000000"};

static void text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

static int index_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (!strcmp(names[i], name))
            return i;
    }
    return -1;
}

/* A tick step of 1, 2 or 5 x 10^k giving about five ticks up to max. */
static double tick_step(double max)
{
    double raw = max / 5.0, mag = pow(10.0, floor(log10(raw)));
    double unit = raw / mag;
    return mag * (unit <= 1.0 ? 1.0 : unit <= 2.0 ? 2.0 : unit <= 5.0 ? 5.0 : 10.0);
}

int plot_svg(const char *path, const char *title, const char *subtitle, const char *y_label,
             const plot_bar *bars, int n_bars, char *err, size_t err_size)
{
    const char *series[MAX_SERIES], *groups[MAX_GROUPS];
    int n_series = 0, n_groups = 0;
    double max = 0.0;
    for (int i = 0; i < n_bars; i++) {
        if (index_of(series, n_series, bars[i].series) < 0) {
            if (n_series == MAX_SERIES) {
                snprintf(err, err_size, "%s: more than %d series to plot", path, MAX_SERIES);
                return -1;
            }
            series[n_series++] = bars[i].series;
        }
        if (index_of(groups, n_groups, bars[i].group) < 0) {
            if (n_groups == MAX_GROUPS) {
                snprintf(err, err_size, "%s: more than %d groups to plot", path, MAX_GROUPS);
                return -1;
            }
            groups[n_groups++] = bars[i].group;
        }
        if (isfinite(bars[i].value) && bars[i].value > max)
            max = bars[i].value;
    }
    if (n_bars == 0) {
        snprintf(err, err_size, "%s: nothing to plot", path);
        return -1;
    }
    double step = max > 0 ? tick_step(max) : 1.0;
    double top = step * ceil(max / step * 1.0001);
    if (top <= 0)
        top = step;
    int cluster = n_series * (BAR_W + BAR_GAP) - BAR_GAP;
    int plot_w = n_groups * (cluster + GROUP_GAP);
    int width = LEFT + plot_w + RIGHT;
    if (width < 560)
        width = 560;
    int height = TOP + PLOT_H + BOTTOM;
    FILE *f; /* written beside path and renamed over it when whole */
    char *tmp;
    vf_err verr;
    if (vfi_replace_open(path, &f, &tmp, &verr) < 0) {
        snprintf(err, err_size, "%s", verr.msg);
        return -1;
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
    fprintf(f, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", LEFT);
    text(f, title);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"40\" fill=\"#444\">", LEFT);
    text(f, subtitle);
    fprintf(f, "</text>\n");
    /* legend */
    int lx = LEFT;
    for (int s = 0; s < n_series; s++) {
        fprintf(f, "<rect x=\"%d\" y=\"54\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx,
                colours[s % (sizeof(colours) / sizeof(colours[0]))]);
        fprintf(f, "<text x=\"%d\" y=\"64\">", lx + 16);
        text(f, series[s]);
        fprintf(f, "</text>\n");
        lx += 16 + 8 * (int)strlen(series[s]) + 18;
    }
    /* y axis, grid and ticks */
    int y0 = TOP + PLOT_H;
    for (double v = 0.0; v <= top * 1.0001; v += step) {
        int y = y0 - (int)lround(v / top * PLOT_H);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%g</text>\n",
                LEFT, y, LEFT + plot_w, y, v == 0.0 ? "#000" : "#ddd", LEFT - 6, y + 4, v);
    }
    fprintf(f, "<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">",
            TOP + PLOT_H / 2);
    text(f, y_label);
    fprintf(f, "</text>\n");
    /* bars */
    for (int g = 0; g < n_groups; g++) {
        int gx = LEFT + GROUP_GAP / 2 + g * (cluster + GROUP_GAP);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", gx + cluster / 2, y0 + 20);
        text(f, groups[g]);
        fprintf(f, "</text>\n");
        for (int i = 0; i < n_bars; i++) {
            if (strcmp(bars[i].group, groups[g]) || !isfinite(bars[i].value))
                continue;
            int s = index_of(series, n_series, bars[i].series);
            int x = gx + s * (BAR_W + BAR_GAP);
            int h = (int)lround(fmax(bars[i].value, 0.0) / top * PLOT_H);
            fprintf(f,
                    "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\">"
                    "<title>",
                    x, y0 - h, BAR_W, h, colours[s % (sizeof(colours) / sizeof(colours[0]))]);
            text(f, bars[i].series);
            fprintf(f, ", %s: %.2f</title></rect>", groups[g], bars[i].value);
            fprintf(f,
                    "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%.*f</text>\n",
                    x + BAR_W / 2, y0 - h - 4, bars[i].value < 10 ? 1 : 0, bars[i].value);
        }
    }
    fprintf(f, "</svg>\n");
    if (vfi_replace_close(f, tmp, path, &verr) < 0) {
        snprintf(err, err_size, "%s", verr.msg);
        return -1;
    }
    return 0;
}
