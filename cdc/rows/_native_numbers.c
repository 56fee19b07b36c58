/* Tail's C row decoder (see _native.c): fixed-width values as the Python fast path encodes them, quoted where
 * they are JSON strings; integers, DECIMAL (exact text), DATETIME2, DATE, YEAR, TIMESTAMP2 (UTC) and TIME2.
 */
#include "_native.h"

int put_int(Buf *out, const unsigned char *p, long size, long is_unsigned) {
    if (buf_reserve(out, 24) < 0) return -1;
    uint64_t raw = le(p, (int)size);
    char *w = out->data + out->len;
    if (!is_unsigned) {
        int shift = 64 - 8 * (int)size;
        int64_t v = (int64_t)(raw << shift) >> shift;
        if (v < 0) { *w++ = '-'; raw = (uint64_t)0 - (uint64_t)v; }
        else raw = (uint64_t)v;
    }
    out->len = digits_at(w, raw, 1) - out->data;
    return 0;
}

static const int DIG2BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
static const uint32_t POW10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

Py_ssize_t decimal_size(long precision, long scale) {
    long intg = precision - scale;
    return DIG2BYTES[intg % 9] + 4 * (intg / 9) + 4 * (scale / 9) + DIG2BYTES[scale % 9];
}

/* One group of `digits` digits in `width` big-endian bytes, its bits inverted for a negative value. */
static int decimal_group(const unsigned char *p, int width, int digits, uint8_t flip, int first, char *text) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        uint8_t byte = p[i] ^ flip;
        if (first && i == 0) byte ^= 0x80; /* the sign bit reads as 0 either way */
        v = v << 8 | byte;
    }
    if (v >= POW10[digits]) return -1; /* not a valid group: Python's arithmetic would differ, let it decide */
    digits_at(text, v, digits);
    return 0;
}

/* DECIMAL as cdc.rows.decimals.decimal_text_reader writes it, quoted. */
int put_decimal(Buf *out, const unsigned char *p, long precision, long scale) {
    long intg = precision - scale;
    uint8_t flip = (p[0] & 0x80) ? 0 : 0xFF;
    char digits[96], group[12];
    Py_ssize_t n = 0;
    int first = 1;
    if (intg % 9) {
        if (decimal_group(p, DIG2BYTES[intg % 9], intg % 9, flip, first, group) < 0) goto bad;
        memcpy(digits + n, group, intg % 9); n += intg % 9; p += DIG2BYTES[intg % 9]; first = 0;
    }
    for (long i = 0; i < intg / 9; i++) {
        if (decimal_group(p, 4, 9, flip, first, group) < 0) goto bad;
        memcpy(digits + n, group, 9); n += 9; p += 4; first = 0;
    }
    Py_ssize_t lead = 0;
    while (lead < n - 1 && digits[lead] == '0') lead++;
    if (buf_reserve(out, 100) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (flip) *w++ = '-';
    if (n == 0) *w++ = '0';
    memcpy(w, digits + lead, n - lead); w += n - lead;
    if (scale) {
        *w++ = '.';
        for (long i = 0; i < scale / 9; i++) {
            if (decimal_group(p, 4, 9, flip, first, group) < 0) goto bad;
            memcpy(w, group, 9); w += 9; p += 4; first = 0;
        }
        if (scale % 9) {
            if (decimal_group(p, DIG2BYTES[scale % 9], scale % 9, flip, first, group) < 0) goto bad;
            memcpy(w, group, scale % 9); w += scale % 9;
        }
    }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "DECIMAL group out of range");
    return -1;
}

int put_datetime2(Buf *out, const unsigned char *p, long fsize, long scale) {
    if (buf_reserve(out, 48) < 0) return -1;
    uint64_t data = be(p, 5);
    unsigned ym = (unsigned)((data >> 22) & 0x1FFFF);
    char *w = out->data + out->len;
    *w++ = '"';
    w = digits_at(w, ym / 13, 4); *w++ = '-';
    w = digits_at(w, ym % 13, 2); *w++ = '-';
    w = digits_at(w, (data >> 17) & 0x1F, 2); *w++ = ' ';
    w = digits_at(w, (data >> 12) & 0x1F, 2); *w++ = ':';
    w = digits_at(w, (data >> 6) & 0x3F, 2); *w++ = ':';
    w = digits_at(w, data & 0x3F, 2);
    if (fsize) { *w++ = '.'; w = digits_at(w, be(p + 5, (int)fsize) * (uint64_t)scale, 6); }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

int put_date(Buf *out, const unsigned char *p) {
    if (buf_reserve(out, 24) < 0) return -1;
    unsigned v = (unsigned)le(p, 3);
    char *w = out->data + out->len;
    *w++ = '"';
    w = digits_at(w, v >> 9, 4); *w++ = '-';
    w = digits_at(w, (v >> 5) & 0xF, 2); *w++ = '-';
    w = digits_at(w, v & 0x1F, 2);
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* YEAR as cdc.rows.temporal.read_year + cdc.values: 0 stays 0, else 1900 + the byte. */
int put_year(Buf *out, const unsigned char *p) {
    if (buf_reserve(out, 8) < 0) return -1;
    out->len = digits_at(out->data + out->len, p[0] ? 1900u + p[0] : 0, 1) - out->data;
    return 0;
}

/* TIMESTAMP2 as timestamp2_reader + cdc.values: UTC 'YYYY-MM-DDThh:mm:ss[.ffffff]Z', zero as 0000-00-00T00:00:00. */
int put_timestamp2(Buf *out, const unsigned char *p, long fsize, long scale) {
    static const uint64_t UNIT[4] = {0, 10000, 100, 1}; /* microseconds per unit of 1-3 fraction bytes */
    uint64_t seconds = be(p, 4), micro = fsize ? be(p + 4, (int)fsize) * UNIT[fsize] : 0;
    if (micro > 999999) {
        PyErr_SetString(PyExc_ValueError, "TIMESTAMP fraction out of range");
        return -1;
    }
    if (buf_reserve(out, 40) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (seconds == 0 && micro == 0) {
        memcpy(w, "0000-00-00T00:00:00", 19); w += 19;
    } else { /* days since 1970-01-01 to a civil date (the proleptic Gregorian calendar, as Python's) */
        int64_t z = (int64_t)(seconds / 86400) + 719468, rest = (int64_t)(seconds % 86400);
        int64_t era = z / 146097, doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
        int64_t year = yoe + era * 400 + (month <= 2);
        w = digits_at(w, (uint64_t)year, 4); *w++ = '-';
        w = digits_at(w, (uint64_t)month, 2); *w++ = '-';
        w = digits_at(w, (uint64_t)day, 2); *w++ = 'T';
        w = digits_at(w, (uint64_t)(rest / 3600), 2); *w++ = ':';
        w = digits_at(w, (uint64_t)(rest / 60 % 60), 2); *w++ = ':';
        w = digits_at(w, (uint64_t)(rest % 60), 2);
    }
    if (scale) { *w++ = '.'; w = digits_at(w, micro, 6); }
    *w++ = 'Z';
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}

/* TIME2 as time2_reader + cdc.values: '[-]hh:mm:ss[.ffffff]' from the total microseconds. */
int put_time2(Buf *out, const unsigned char *p, long fsize, long scale) {
    static const uint64_t UNIT[4] = {0, 10000, 100, 1};
    int width = 3 + (int)fsize;
    int64_t raw = (int64_t)be(p, width) - ((int64_t)1 << (8 * width - 1));
    int negative = raw < 0;
    uint64_t magnitude = negative ? (uint64_t)(-raw) : (uint64_t)raw;
    uint64_t intpart = magnitude >> (8 * fsize), frac = magnitude & ((1ull << (8 * fsize)) - 1);
    uint64_t total = (((intpart >> 12) & 0x3FF) * 3600 + ((intpart >> 6) & 0x3F) * 60 + (intpart & 0x3F)) * 1000000 +
                     frac * UNIT[fsize];
    if (buf_reserve(out, 40) < 0) return -1;
    char *w = out->data + out->len;
    *w++ = '"';
    if (negative && total) *w++ = '-';
    uint64_t secs = total / 1000000;
    w = digits_at(w, secs / 3600, 2); *w++ = ':';
    w = digits_at(w, secs / 60 % 60, 2); *w++ = ':';
    w = digits_at(w, secs % 60, 2);
    if (scale) { *w++ = '.'; w = digits_at(w, total % 1000000, 6); }
    *w++ = '"';
    out->len = w - out->data;
    return 0;
}
