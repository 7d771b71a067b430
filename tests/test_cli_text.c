/*
 * test_cli_text.c - the command's text output (src/cli/text.c): cli_printf formats numbers as
 * printf does (every length and flag the command uses, * widths), and writes the control
 * characters of its %s arguments as `ls -b` does, never the format's own (nor %c's).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli/cli.h"

/* cli_printf's output as a string. */
static void render(char *out, size_t size, const char *fmt, ...)
{
    FILE *f = tmpfile();
    CHECK(f);
    va_list ap;
    va_start(ap, fmt);
    int n = cli_vprintf(f, fmt, ap);
    va_end(ap);
    CHECK(n >= 0);
    rewind(f);
    size_t got = fread(out, 1, size - 1, f);
    out[got] = '\0';
    CHECK((int)got == n);
    fclose(f);
}

static void expect(const char *got, const char *want)
{
    if (strcmp(got, want)) {
        fprintf(stderr, "got  '%s'\nwant '%s'\n", got, want);
        exit(1);
    }
}

int main(void)
{
    char got[512], want[512];
    /* numbers as printf has them */
    render(got, sizeof(got), "%d %5d %-4d| %lld %7lld %zu %u %x %%", -3, 42, 7, -9000000000LL,
           123LL, (size_t)99, 4000000000u, 255u);
    snprintf(want, sizeof(want), "%d %5d %-4d| %lld %7lld %zu %u %x %%", -3, 42, 7, -9000000000LL,
             123LL, (size_t)99, 4000000000u, 255u);
    expect(got, want);
    render(got, sizeof(got), "%.3f %10.6f %g %.*f %*d %ld", 1.23456, -0.5, 1e-7, 2, 3.14159, 6, 12,
           77L);
    snprintf(want, sizeof(want), "%.3f %10.6f %g %.*f %*d %ld", 1.23456, -0.5, 1e-7, 2, 3.14159, 6,
             12, 77L);
    expect(got, want);
    render(got, sizeof(got), "[%s] [%8s] [%-6s] [%.2s] [%c]", "plain", "right", "left", "cut", 'x');
    expect(got, "[plain] [   right] [left  ] [cu] [x]");
    /* the format's own controls are written; the arguments' escaped */
    render(got, sizeof(got), "\r\033[Kvidfeat: %s: done\n", "a\nvidfeat: b.mp4: done");
    expect(got, "\r\033[Kvidfeat: a\\nvidfeat: b.mp4: done: done\n");
    render(got, sizeof(got), "%s", "\033[31mred\033[0m\a\b\t\v\f\r\x01\x7f");
    expect(got, "\\033[31mred\\033[0m\\a\\b\\t\\v\\f\\r\\001\\177");
    render(got, sizeof(got), "%s|%c",
           "caf\xc3\xa9 \xc2\x9b"
           "2J",
           '\n');
    expect(got, "caf\xc3\xa9 \\302\\2332J|\n"); /* %c: the command's own separator */
    char small[8];
    CHECK(cli_escape(small, sizeof(small), "ab\ncd\nef") == 10);
    expect(small, "ab\\ncd\\");
    printf("cli text: numbers as printf, controls of arguments escaped\n");
    return 0;
}
