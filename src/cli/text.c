/*
 * text.c - text output that cannot drive the terminal (see cli.h: cli_printf, cli_escape).
 *
 * Paths come from directory walks, queues and databases, texts from users and error messages
 * from files: any of them may hold a newline (a forged result line), ESC (a terminal control
 * sequence) or BEL. Written as text, their control characters are shown as `ls -b` shows them:
 * \n, \t, \r, \a, \b, \f, \v, \e as \033, others (and DEL, and C1 controls encoded in UTF-8)
 * as a backslash and three octal digits. The format's own characters, and %c's (the command's
 * separators), are written as they are.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

size_t cli_escape(char *out, size_t size, const char *s)
{
    static const char named[] = "\a\b\t\n\v\f\r";
    static const char letter[] = "abtnvfr";
    size_t n = 0;
    char piece[16];
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int len = 1;
        if (*p < 0x20 || *p == 0x7f) {
            const char *k = *p ? strchr(named, *p) : NULL;
            len = k ? snprintf(piece, sizeof(piece), "\\%c", letter[k - named])
                    : snprintf(piece, sizeof(piece), "\\%03o", *p);
        } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
            len = snprintf(piece, sizeof(piece), "\\%03o\\%03o", p[0], p[1]);
            p++;
        } else {
            piece[0] = (char)*p;
        }
        for (int i = 0; i < len; i++, n++)
            if (n + 1 < size)
                out[n] = piece[i];
    }
    if (size)
        out[n < size ? n : size - 1] = '\0';
    return n;
}

/* One conversion of fmt (from '%' to its letter, at most 31 characters) into spec; its end. */
static const char *take_spec(const char *fmt, char *spec, size_t size)
{
    size_t n = 0;
    const char *p = fmt + 1;
    while (*p && !strchr("diouxXeEfFgGaAcspn%", *p))
        p++;
    size_t len = (size_t)(p - fmt) + (*p ? 1 : 0);
    n = len < size ? len : size - 1;
    memcpy(spec, fmt, n);
    spec[n] = '\0';
    return fmt + len;
}

/* spec with each '*' replaced by the int argument it stands for, into out. */
static void take_stars(const char *spec, char *out, size_t size, va_list *ap)
{
    size_t n = 0;
    for (const char *q = spec; *q && n + 1 < size; q++) {
        if (*q == '*')
            n += (size_t)snprintf(out + n, size - n, "%d", va_arg(*ap, int));
        else
            out[n++] = *q;
        if (n >= size) /* a width too long to be meant: cut */
            n = size - 1;
    }
    out[n] = '\0';
}

int cli_vprintf(FILE *f, const char *fmt, va_list ap)
{
    int total = 0;
    char given[32], spec[64], buf[512];
    va_list args;
    va_copy(args, ap); /* taken through a pointer by take_stars */
    while (*fmt) {
        const char *pct = strchr(fmt, '%');
        size_t lit = pct ? (size_t)(pct - fmt) : strlen(fmt);
        if (lit && fwrite(fmt, 1, lit, f) != lit) {
            total = -1;
            break;
        }
        total += (int)lit;
        if (!pct)
            break;
        fmt = take_spec(pct, given, sizeof(given));
        take_stars(given, spec, sizeof(spec), &args);
        char conv = spec[strlen(spec) - 1];
        size_t conv_at = strlen(spec) - 1, lm = strcspn(spec, "hljztL");
        const char *len_mod = spec + (lm < conv_at ? lm : conv_at); /* its length, or its letter */
        int r;
        if (conv == '%') {
            r = fputc('%', f) == EOF ? -1 : 1;
        } else if (conv == 's') { /* escaped, then laid out as the spec says */
            const char *s = va_arg(args, const char *);
            char esc[8192];
            cli_escape(esc, sizeof(esc), s ? s : "(null)");
            r = fprintf(f, spec, esc);
        } else {
            /* a number, a character or a pointer: fetched by its type, then formatted */
            if (strchr("eEfFgGaA", conv)) {
                if (*len_mod == 'L')
                    r = snprintf(buf, sizeof(buf), spec, va_arg(args, long double));
                else
                    r = snprintf(buf, sizeof(buf), spec, va_arg(args, double));
            } else if (conv == 'p' || conv == 'n') {
                void *v = va_arg(args, void *);
                r = conv == 'p' ? snprintf(buf, sizeof(buf), spec, v) : 0;
            } else if (conv == 'c') { /* the command's own separators: as they are */
                r = snprintf(buf, sizeof(buf), spec, va_arg(args, int));
            } else {
                /* integers: every length read at its own width, shown through intmax_t */
                intmax_t v;
                int is_unsigned = strchr("ouxX", conv) != NULL;
                if (!strncmp(len_mod, "ll", 2))
                    v = is_unsigned ? (intmax_t)va_arg(args, unsigned long long)
                                    : (intmax_t)va_arg(args, long long);
                else if (*len_mod == 'l')
                    v = is_unsigned ? (intmax_t)va_arg(args, unsigned long) : va_arg(args, long);
                else if (*len_mod == 'z')
                    v = (intmax_t)va_arg(args, size_t);
                else if (*len_mod == 'j')
                    v = va_arg(args, intmax_t);
                else
                    v = is_unsigned ? (intmax_t)va_arg(args, unsigned) : va_arg(args, int);
                char ispec[sizeof(spec) + 8];
                snprintf(ispec, sizeof(ispec), "%.*sj%c", (int)(len_mod - spec), spec, conv);
                r = snprintf(buf, sizeof(buf), ispec, v);
            }
            if (r > 0) {
                size_t w = (size_t)r < sizeof(buf) ? (size_t)r : sizeof(buf) - 1;
                r = fwrite(buf, 1, w, f) == w ? (int)w : -1;
            }
        }
        if (r < 0) {
            total = -1;
            break;
        }
        total += r;
    }
    va_end(args);
    return total;
}

int cli_printf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = cli_vprintf(f, fmt, ap);
    va_end(ap);
    return r;
}
