/* What one journal watch's pattern costs the daemon's matcher (PCRE2, with the daemon's options and limits) and,
 * as the baseline, glibc's POSIX matcher: compiling it, and testing one message. One pattern per process, so that
 * the resident memory it reports is that pattern's.
 *
 *   cc -O2 -o /tmp/matchers Benchmarks/PatternCost/matchers.c -lpcre2-8
 *   /tmp/matchers ENGINE PATTERN MESSAGE
 *
 * ENGINE is pcre2 or glibc. MESSAGE is log (a 90-byte log line), ab (16 KiB of a and b, the same each run),
 * abc (that, ending in a, twenty b and c), a30 (thirty a), a4k (4096 a then b). It prints the compile and match
 * times, the outcome and the resident memory the process reached; an engine that takes over 20 s is stopped and
 * says so. docs/operator.md gives the loop over the patterns it shows.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long resident_kib(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

static void too_long(int signal) {
    (void)signal;
    static const char text[] = "over 20 s: stopped\n";
    write(1, text, sizeof text - 1);
    _exit(0);
}

static char *message(const char *kind) {
    enum { size = 16 << 10 };
    char *text = calloc(size + 1, 1);
    if (strcmp(kind, "log") == 0) {
        strcpy(text, "nginx[812]: upstream timed out (110: Connection timed out) while reading from 10.0.3.17, failed 12 times");
    } else if (strcmp(kind, "ab") == 0 || strcmp(kind, "abc") == 0) {
        unsigned state = 1;
        for (int i = 0; i < size; i++) {
            state = state * 1103515245 + 12345;
            text[i] = (state >> 16) & 1 ? 'a' : 'b';
        }
        if (strcmp(kind, "abc") == 0) {
            text[size - 22] = 'a';
            memset(text + size - 21, 'b', 20);
            text[size - 1] = 'c';
        }
    } else if (strcmp(kind, "a30") == 0) {
        memset(text, 'a', 30);
    } else if (strcmp(kind, "a4k") == 0) {
        memset(text, 'a', 4096);
        text[4096] = 'b';
    } else {
        fprintf(stderr, "unknown message %s\n", kind);
        exit(2);
    }
    return text;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s pcre2|glibc PATTERN log|ab|abc|a30|a4k\n", argv[0]);
        return 2;
    }
    const char *pattern = argv[2];
    char *subject = message(argv[3]);
    size_t length = strlen(subject);
    long before = resident_kib();
    signal(SIGALRM, too_long);
    alarm(20);
    double start = now(), compiled, matched;
    const char *outcome;
    char words[256] = "";
    if (strcmp(argv[1], "pcre2") == 0) {
        int code;
        PCRE2_SIZE offset;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, strlen(pattern),
                                       PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_NEVER_BACKSLASH_C, &code, &offset, NULL);
        compiled = now();
        if (re == NULL) {
            pcre2_get_error_message(code, (PCRE2_UCHAR *)words, sizeof words);
            printf("refused: %s; compile %.3f ms; resident +%ld KiB\n", words, (compiled - start) * 1e3, resident_kib() - before);
            return 0;
        }
        pcre2_match_context *context = pcre2_match_context_create(NULL);
        pcre2_set_match_limit(context, 1000000);
        pcre2_set_heap_limit(context, 8192);
        pcre2_match_data *data = pcre2_match_data_create(1, NULL);
        int result = pcre2_match(re, (PCRE2_SPTR)subject, length, 0, 0, data, context);
        matched = now();
        if (result >= 0) outcome = "matches";
        else if (result == PCRE2_ERROR_NOMATCH) outcome = "does not match";
        else {
            pcre2_get_error_message(result, (PCRE2_UCHAR *)words, sizeof words);
            outcome = words;
        }
    } else {
        regex_t re;
        int result = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
        compiled = now();
        if (result != 0) {
            regerror(result, &re, words, sizeof words);
            printf("refused: %s; compile %.3f ms; resident +%ld KiB\n", words, (compiled - start) * 1e3, resident_kib() - before);
            return 0;
        }
        outcome = regexec(&re, subject, 0, NULL, 0) == 0 ? "matches" : "does not match";
        matched = now();
    }
    printf("%s; compile %.3f ms, match %.3f ms; resident +%ld KiB\n", outcome, (compiled - start) * 1e3,
           (matched - compiled) * 1e3, resident_kib() - before);
    return 0;
}
