/* Strict JSON for the merge's C readers of change lines (_scan.c, _latest.c): validated byte by byte, nothing built.
 *
 * A reader is sure of a line only when these checks pass: one JSON object, every string valid UTF-8 with no
 * surrogate escape, numbers short enough for any reader (unless it never decodes them: lax), no deeper nesting
 * than MAX_DEPTH, and none of the fields it reads escaped in its name or repeated. Anything else is left to the Python path (orjson, the reference).
 */
#ifndef CDC_SCAN_JSON_H
#define CDC_SCAN_JSON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define POS_MAX 64   /* positions are 37 bytes (docs/formats.md); a longer one goes to Python */
#define MAX_DEPTH 64 /* deeper nesting goes to Python (orjson's limit is higher) */
#define MAX_NUMBER 18 /* a longer number token goes to Python: readers differ on huge numbers */

typedef const unsigned char *cursor;

enum kind { ABSENT, STRING, ESCAPED, OTHER };

/* One read field's value: a string's bytes between its quotes, else the value's bytes inside its first and
 * last byte (an object's members without the braces). */
typedef struct {
    cursor p;
    Py_ssize_t n;
    int kind;
} field;

static inline cursor skip_ws(cursor p, cursor end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

static inline int hex4(cursor p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence starting at p (a byte >= 0x80): its length, 0 if invalid (overlong, surrogate, > U+10FFFF). */
static inline int utf8_length(cursor p, cursor end)
{
    unsigned c = p[0];
    Py_ssize_t left = end - p;
#define CONT(i) (left > (i) && (p[i] & 0xC0) == 0x80)
    if (c >= 0xC2 && c <= 0xDF) return CONT(1) ? 2 : 0;
    if (c == 0xE0) return left > 2 && p[1] >= 0xA0 && p[1] <= 0xBF && CONT(2) ? 3 : 0;
    if (c == 0xED) return left > 2 && p[1] >= 0x80 && p[1] <= 0x9F && CONT(2) ? 3 : 0;
    if (c >= 0xE1 && c <= 0xEF) return CONT(1) && CONT(2) ? 3 : 0;
    if (c == 0xF0) return left > 3 && p[1] >= 0x90 && p[1] <= 0xBF && CONT(2) && CONT(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return CONT(1) && CONT(2) && CONT(3) ? 4 : 0;
    if (c == 0xF4) return left > 3 && p[1] >= 0x80 && p[1] <= 0x8F && CONT(2) && CONT(3) ? 4 : 0;
    return 0;
#undef CONT
}

/* 1 for a byte a string passes over as it is: printable ASCII but the quote and the backslash. */
static const unsigned char JSON_PLAIN[256] = {
    [' '] = 1, ['!'] = 1, ['#' ... '['] = 1, [']' ... 0x7F] = 1,
};

/* A string whose opening quote is at p[-1]: the byte after its closing quote, NULL if not sure of it.
 * *escaped: whether it holds an escape (its bytes are then not its value). */
static inline cursor skip_string(cursor p, cursor end, int *escaped)
{
    while (p < end) {
        /* Most of a change line's bytes are plain text: one table load per byte, four tested per branch (the
         * JSON readers' hottest loop: ~28% of the CPU of the merge's C pass in a profile, before this loop). */
        while (end - p >= 4 && (JSON_PLAIN[p[0]] & JSON_PLAIN[p[1]] & JSON_PLAIN[p[2]] & JSON_PLAIN[p[3]])) p += 4;
        while (p < end && JSON_PLAIN[*p]) p++;
        if (p >= end) return NULL;
        unsigned c = *p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            *escaped = 1;
            if (p + 1 >= end) return NULL;
            c = p[1];
            if (c == 'u') {
                unsigned v;
                if (end - p < 6 || !hex4(p + 2, &v) || (v >= 0xD800 && v <= 0xDFFF)) return NULL;
                p += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                p += 2;
            } else {
                return NULL;
            }
        } else { /* a byte >= 0x80: what is left once the plain ones are passed over */
            int n = utf8_length(p, end);
            if (!n) return NULL;
            p += n;
        }
    }
    return NULL;
}

/* lax: any length of digits (a reader that only finds where the number ends, never decodes it). */
static inline cursor skip_number(cursor p, cursor end, int lax)
{
    cursor start = p;
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < end && *p >= '0' && *p <= '9') p++;
    else return NULL;
    if (p < end && *p == '.') {
        cursor digits = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits) return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        cursor digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits || (!lax && p - digits > 2)) return NULL; /* 1e999: readers differ (inf, an error) */
    }
    return !lax && p - start > MAX_NUMBER ? NULL : p;
}

static inline cursor skip_value(cursor p, cursor end, int depth, int lax);

/* An object or array whose opening bracket is at p[-1]. */
static inline cursor skip_container(cursor p, cursor end, int depth, unsigned char close, int lax)
{
    if (depth > MAX_DEPTH) return NULL;
    p = skip_ws(p, end);
    if (p < end && *p == close) return p + 1;
    for (;;) {
        if (close == '}') {
            int escaped = 0;
            if (p >= end || *p != '"' || !(p = skip_string(p + 1, end, &escaped))) return NULL;
            p = skip_ws(p, end);
            if (p >= end || *p != ':') return NULL;
            p = skip_ws(p + 1, end);
        }
        if (!(p = skip_value(p, end, depth + 1, lax))) return NULL;
        p = skip_ws(p, end);
        if (p >= end) return NULL;
        if (*p == close) return p + 1;
        if (*p != ',') return NULL;
        p = skip_ws(p + 1, end);
    }
}

static inline cursor skip_literal(cursor p, cursor end, const char *word, size_t n)
{
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

static inline cursor skip_value(cursor p, cursor end, int depth, int lax)
{
    int escaped = 0;
    if (p >= end) return NULL;
    switch (*p) {
    case '"': return skip_string(p + 1, end, &escaped);
    case '{': return skip_container(p + 1, end, depth, '}', lax);
    case '[': return skip_container(p + 1, end, depth, ']', lax);
    case 't': return skip_literal(p, end, "true", 4);
    case 'f': return skip_literal(p, end, "false", 5);
    case 'n': return skip_literal(p, end, "null", 4);
    default: return skip_number(p, end, lax);
    }
}

/* One line's fields, those `wanted` numbers (0..n-1; -1 for the others); 0 if the line is not one sure JSON object.
 * lax: numbers of any length (skip_number). */
static inline int read_fields(cursor p, cursor end, field *fields, int n, int (*wanted)(cursor, Py_ssize_t), int lax)
{
    memset(fields, 0, sizeof(field) * (size_t)n);
    p = skip_ws(p, end);
    if (p >= end || *p != '{') return 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return skip_ws(p + 1, end) == end;
    for (;;) {
        int escaped = 0;
        if (p >= end || *p != '"') return 0;
        cursor key = p + 1;
        if (!(p = skip_string(key, end, &escaped)) || escaped) return 0;
        int which = wanted(key, p - 1 - key);
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return 0;
        p = skip_ws(p + 1, end);
        cursor value = p;
        escaped = 0;
        if (!(p = *p == '"' ? skip_string(p + 1, end, &escaped) : skip_value(p, end, 1, lax))) return 0;
        if (which >= 0) {
            field *f = &fields[which];
            if (f->kind != ABSENT) return 0; /* a repeated key: which one counts is the reader's choice */
            f->kind = *value != '"' ? OTHER : escaped ? ESCAPED : STRING;
            f->p = value + 1;
            f->n = p - value - 2;
        }
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p == '}') return skip_ws(p + 1, end) == end;
        if (*p != ',') return 0;
        p = skip_ws(p + 1, end);
    }
}

static inline int compare(cursor a, Py_ssize_t a_n, cursor b, Py_ssize_t b_n)
{
    int c = memcmp(a, b, (size_t)(a_n < b_n ? a_n : b_n));
    return c ? c : (a_n > b_n) - (a_n < b_n);
}

#define FNV_START 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

static inline uint64_t fnv(uint64_t h, cursor p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* A table's hash: its db, a NUL, its table name. */
static inline uint64_t name_hash(cursor db, Py_ssize_t db_n, cursor tb, Py_ssize_t tb_n)
{
    return fnv(fnv(FNV_START, db, db_n) * FNV_PRIME, tb, tb_n);
}

#endif
