/*
 * svg.c - inline SVG charts for `remat report` (svg.h): axes with ticks at 1, 2 or 5
 * times a power of ten in a readable unit, the memory timeline of a schedule and a chart
 * of curves. Coordinates are written with one decimal in a fixed viewBox; the page
 * scales the SVG to its width.
 */
#include "cli/svg.h"

#include <math.h>

#define TL_W 1100 /* timeline viewBox */
#define TL_H 300
#define CV_W 600  /* chart of curves */
#define CV_H 360

double svg_px(const struct svg_plot *p, double x)
{
    return p->left + (p->x1 > p->x0 ? (x - p->x0) / (p->x1 - p->x0) : 0) * p->width;
}

double svg_py(const struct svg_plot *p, double y)
{
    return p->top + p->height -
           (p->y1 > p->y0 ? (y - p->y0) / (p->y1 - p->y0) : 0) * p->height;
}

void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

const char *svg_color(int i)
{
    static const char *const c[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf"};

    return c[(i % 10 + 10) % 10];
}

/* ------------------------------------------------------------------- axes */

/* The unit a range reads in: its scale and name. */
static double unit_of(enum svg_unit u, double max, const char **name)
{
    static const char *const bytes[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double scale = 1;
    int k = 0;

    *name = "";
    if (u == SVG_BYTES) {
        while (max / scale >= 1024 && k < 4) {
            scale *= 1024;
            k++;
        }
        *name = bytes[k];
    } else if (u == SVG_SECONDS) {
        scale = max < 1 ? 1e-3 : 1;
        *name = max < 1 ? "ms" : "s";
    }
    return scale;
}

/* A tick step of 1, 2 or 5 times a power of ten giving about n ticks over range. */
static double nice_step(double range, int n)
{
    double raw = range / n, mag, f;

    if (!(raw > 0))
        return 1;
    mag = pow(10, floor(log10(raw)));
    f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Ticks along one axis: grid lines and labels. */
static void ticks(const struct svg_plot *p, bool vertical, enum svg_unit u, int n)
{
    double lo = vertical ? p->y0 : p->x0, hi = vertical ? p->y1 : p->x1, scale, step;
    const char *name;
    int dec;

    scale = unit_of(u, hi, &name);
    step = nice_step((hi - lo) / scale, n);
    if (u == SVG_COUNT && step < 1)
        step = 1;
    dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double v = ceil(lo / scale / step) * step; v <= hi / scale + 1e-9 * step; v += step) {
        double x = svg_px(p, v * scale), y = svg_py(p, v * scale);

        if (vertical)
            fprintf(p->f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
                    "y2=\"%.1f\"/><text class=\"tick\" x=\"%.1f\" y=\"%.1f\" "
                    "text-anchor=\"end\">%.*f %s</text>\n", p->left, p->left + p->width,
                    y, y, p->left - 6, y + 4, dec, v, name);
        else
            fprintf(p->f, "<line class=\"tickmark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
                    "y2=\"%.1f\"/><text class=\"tick\" x=\"%.1f\" y=\"%.1f\" "
                    "text-anchor=\"middle\">%.*f%s%s</text>\n", x, x, p->top + p->height,
                    p->top + p->height + 5, x, p->top + p->height + 18, dec, v,
                    *name ? " " : "", name);
    }
}

void svg_axes(const struct svg_plot *p, enum svg_unit xu, enum svg_unit yu,
              const char *xtitle, const char *ytitle)
{
    ticks(p, true, yu, 5);
    ticks(p, false, xu, p->width > 600 ? 8 : 4);
    fprintf(p->f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\"/>\n", p->left, p->top, p->width, p->height);
    fprintf(p->f, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
            p->left + p->width / 2, p->top + p->height + 36);
    html_text(p->f, xtitle);
    fprintf(p->f, "</text>\n<text class=\"axis-title\" transform=\"translate(14 %.1f) "
            "rotate(-90)\" text-anchor=\"middle\">", p->top + p->height / 2);
    html_text(p->f, ytitle);
    fputs("</text>\n", p->f);
}

void svg_hline(const struct svg_plot *p, double y, const char *cls, const char *label,
               bool below)
{
    double py = svg_py(p, y);

    fprintf(p->f, "<line class=\"%s\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
            "data-value=\"%.0f\"/>\n<text class=\"%s-label\" x=\"%.1f\" y=\"%.1f\" "
            "text-anchor=\"end\">", cls, p->left, p->left + p->width, py, py, y, cls,
            p->left + p->width - 4, below ? py + 13 : py - 4);
    html_text(p->f, label);
    fputs("</text>\n", p->f);
}

/* -------------------------------------------------------------- timeline */

static const char *const lane_names[SVG_LANE_COUNT] = {
    "forward", "recompute", "backward", "offload", "prefetch", "wait", "free"};

/* The marks of one step kind: a rectangle per run of steps of that kind. In the compute
 * lane a run goes on across frees and copies; a copy is marked alone. */
static void lane_marks(const struct svg_plot *p, const struct svg_timeline *t,
                       enum svg_lane k, double y, double h)
{
    bool copies = k >= SVG_OFFLOAD, open = false;
    size_t count = 0, start = 0, last = 0;

    for (size_t i = 0; i < t->n; i++)
        count += t->lane[i] == k;
    fprintf(p->f, "<g class=\"lane lane-%s\" data-kind=\"%s\" data-count=\"%zu\">",
            lane_names[k], lane_names[k], count);
    for (size_t i = 0; i <= t->n; i++) {
        bool brk = i == t->n || (copies ? t->lane[i] != k
                                        : t->lane[i] < SVG_OFFLOAD && t->lane[i] != k);
        double w;

        if (i < t->n && t->lane[i] == k) {
            start = open ? start : i;
            last = i;
            open = true;
        } else if (open && brk) {
            w = svg_px(p, (double)last + 1) - svg_px(p, (double)start);
            fprintf(p->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
                    svg_px(p, (double)start), y, w > 1.2 ? w : 1.2, h);
            open = false;
        }
    }
    fputs("</g>\n", p->f);
}

/* The area of live bytes. */
static void timeline_area(const struct svg_plot *p, const struct svg_timeline *t)
{
    double base = svg_py(p, 0);

    fprintf(p->f, "<polygon class=\"live\" points=\"%.1f,%.1f", svg_px(p, 0), base);
    for (size_t i = 0; i < t->n; i++)
        fprintf(p->f, " %.1f,%.1f", svg_px(p, (double)i), svg_py(p, (double)t->live[i]));
    fprintf(p->f, " %.1f,%.1f\"/>\n", svg_px(p, (double)(t->n - 1)), base);
}

/* The scratch of each step that takes some, as a spike above its live bytes. */
static void timeline_scratch(const struct svg_plot *p, const struct svg_timeline *t)
{
    size_t n_scratch = 0;

    for (size_t i = 0; i < t->n; i++)
        n_scratch += t->scratch[i] > 0;
    fprintf(p->f, "<path class=\"scratch\" data-count=\"%zu\" d=\"", n_scratch);
    for (size_t i = 0; i < t->n; i++)
        if (t->scratch[i])
            fprintf(p->f, "M%.1f %.1fV%.1f", svg_px(p, (double)i), svg_py(p, (double)t->live[i]),
                    svg_py(p, (double)(t->live[i] + t->scratch[i])));
    fputs("\"/>\n", p->f);
}

/* Forward and backward phases as bands behind the plot. */
static void timeline_phases(const struct svg_plot *p, const struct svg_timeline *t)
{
    double xb = svg_px(p, (double)t->first_bwd);

    fprintf(p->f, "<rect class=\"phase-fwd\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\"/><text class=\"phase\" x=\"%.1f\" y=\"%.1f\">forward</text>\n",
            p->left, p->top, xb - p->left, p->height, p->left + 4, p->top + 14);
    if (t->first_bwd < t->n)
        fprintf(p->f, "<rect class=\"phase-bwd\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                "height=\"%.1f\"/><text class=\"phase\" x=\"%.1f\" y=\"%.1f\">backward "
                "(from step %zu)</text>\n", xb, p->top, p->left + p->width - xb, p->height,
                xb + 4, p->top + 14, t->first_bwd);
}

void svg_timeline(FILE *f, const struct svg_timeline *t)
{
    struct svg_plot p = {f, 0, (double)(t->n ? t->n : 1), 0, t->y_max,
                         84, 12, TL_W - 84 - 16, TL_H - 12 - 100};
    double lane_y = p.top + p.height + 44;

    fprintf(f, "<svg class=\"timeline\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "data-strategy=\"", TL_W, TL_H);
    html_text(f, t->strategy);
    fprintf(f, "\" data-steps=\"%zu\" data-peak=\"%zu\" data-peak-step=\"%zu\" "
            "data-budget=\"%zu\" data-lower=\"%zu\">\n<title>", t->n, t->peak, t->peak_step,
            t->budget, t->lower);
    html_text(f, t->strategy);
    fputs(": live bytes over the training step</title>\n", f);
    timeline_phases(&p, t);
    svg_axes(&p, SVG_COUNT, SVG_BYTES, "", "live activation bytes");
    if (t->n) {
        timeline_area(&p, t);
        fprintf(f, "<polyline class=\"total\" data-strategy=\"");
        html_text(f, t->strategy);
        fprintf(f, "\" data-points=\"%zu\" data-peak=\"%zu\" points=\"", t->n, t->peak);
        for (size_t i = 0; i < t->n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", svg_px(&p, (double)i),
                    svg_py(&p, (double)(t->live[i] + t->scratch[i])));
        fputs("\"/>\n", f);
        timeline_scratch(&p, t);
    }
    if (t->budget)
        svg_hline(&p, (double)t->budget, "budget", "budget", false);
    if (t->lower)
        svg_hline(&p, (double)t->lower, "lower", "lower limit", true);
    fprintf(f, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" data-peak=\"%zu\"/>\n",
            svg_px(&p, (double)t->peak_step), svg_py(&p, (double)t->peak), t->peak);
    fprintf(f, "<text class=\"lane-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">compute"
            "</text><text class=\"lane-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">"
            "host copies</text>\n", p.left - 6, lane_y + 10, p.left - 6, lane_y + 30);
    for (int k = SVG_FWD; k <= SVG_WAIT; k++)
        lane_marks(&p, t, (enum svg_lane)k, k >= SVG_OFFLOAD ? lane_y + 20 : lane_y, 14);
    fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">steps of "
            "the schedule</text>\n</svg>\n", p.left + p.width / 2, lane_y + 52);
}

/* ------------------------------------------------------------------ curves */

/* One series: its polyline and a dot per point. */
static void series(const struct svg_plot *p, const struct svg_series *s)
{
    fprintf(p->f, "<g class=\"curve\" style=\"--c:%s\"><polyline class=\"series\" "
            "data-strategy=\"", svg_color(s->color));
    html_text(p->f, s->name);
    fprintf(p->f, "\" data-points=\"%zu\" data-x=\"", s->n);
    for (size_t i = 0; i < s->n; i++)
        fprintf(p->f, "%s%zu", i ? " " : "", s->data_x[i]);
    fputs(s->data_y ? "\" data-y=\"" : "", p->f);
    for (size_t i = 0; s->data_y && i < s->n; i++)
        fprintf(p->f, "%s%zu", i ? " " : "", s->data_y[i]);
    fputs("\" points=\"", p->f);
    for (size_t i = 0; i < s->n; i++)
        fprintf(p->f, "%s%.1f,%.1f", i ? " " : "", svg_px(p, s->x[i]), svg_py(p, s->y[i]));
    fputs("\"/>", p->f);
    for (size_t i = 0; i < s->n; i++)
        fprintf(p->f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", svg_px(p, s->x[i]),
                svg_py(p, s->y[i]));
    fputs("</g>\n", p->f);
}

/* [lo, hi] grown by a twentieth of its span on each side (of hi when empty), not
 * below zero. */
static void widen(double *lo, double *hi)
{
    double m = (*hi > *lo ? *hi - *lo : *hi > 0 ? *hi : 1) / 20;

    *lo = *lo - m > 0 ? *lo - m : 0;
    *hi += m;
}

/* The data ranges of all series, with a margin. */
static void curves_range(struct svg_plot *p, const struct svg_series *s, int n)
{
    bool any = false;

    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < s[k].n; i++) {
            p->x0 = any && p->x0 < s[k].x[i] ? p->x0 : s[k].x[i];
            p->x1 = any && p->x1 > s[k].x[i] ? p->x1 : s[k].x[i];
            p->y0 = any && p->y0 < s[k].y[i] ? p->y0 : s[k].y[i];
            p->y1 = any && p->y1 > s[k].y[i] ? p->y1 : s[k].y[i];
            any = true;
        }
    widen(&p->x0, &p->x1);
    widen(&p->y0, &p->y1);
}

void svg_curves(FILE *f, const char *kind, const struct svg_series *s, int n_series,
                enum svg_unit xu, enum svg_unit yu, const char *xtitle, const char *ytitle,
                bool diagonal)
{
    struct svg_plot p = {f, 0, 0, 0, 0, 86, 12, CV_W - 86 - 150, CV_H - 12 - 50};
    double d0, d1;

    curves_range(&p, s, n_series);
    fprintf(f, "<svg class=\"curves\" viewBox=\"0 0 %d %d\" role=\"img\" data-kind=\"%s\">\n",
            CV_W, CV_H, kind);
    svg_axes(&p, xu, yu, xtitle, ytitle);
    d0 = p.x0 > p.y0 ? p.x0 : p.y0;
    d1 = p.x1 < p.y1 ? p.x1 : p.y1;
    if (diagonal && d1 > d0)
        fprintf(f, "<line class=\"diagonal\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">peak = "
                "budget</text>\n", svg_px(&p, d0), svg_py(&p, d0), svg_px(&p, d1),
                svg_py(&p, d1), svg_px(&p, d1) - 4, svg_py(&p, d1) + 14);
    for (int k = 0; k < n_series; k++)
        series(&p, &s[k]);
    for (int k = 0; k < n_series; k++) {
        fprintf(f, "<g class=\"legend\" style=\"--c:%s\"><rect x=\"%.1f\" y=\"%d\" "
                "width=\"14\" height=\"4\"/><text x=\"%.1f\" y=\"%d\">",
                svg_color(s[k].color), p.left + p.width + 10, 20 + 18 * k,
                p.left + p.width + 28, 26 + 18 * k);
        html_text(f, s[k].name);
        fprintf(f, " (%zu)</text></g>\n", s[k].n);
    }
    fputs("</svg>\n", f);
}
