/* _cprep: the per-line and per-message loops of reading a Pi session, in C (issue 14).
 *
 * - `Preparer(...)(offset, raw)`, `.parse`, `.count`: one line or one message (below);
 * - `.feed_block`, `.prepare_block`, `.add_records` (the map's one-shot reader,
 *   `slim._feed_from` / `_prepare_into` / `_add_records`) and `.feed_lines` (the dashboard's
 *   reader, `PiSessionReader._feed_batch`): many lines per call, each line these leave handed
 *   back to Python with the answer already made;
 * - `attribute`, `turns`, `branch_scan`, `role_counts`, `tool_pairing`: the loops of
 *   `ds4core.categories.attribute`, `live.build_turns`, `live._branch_scan`, the facts and
 *   `context._tool_pairing_warnings`, each equal to its Python loop (tests/sessions/test_c_*.py)
 *   and handing back the shapes it does not read.
 *
 * `Preparer(...)(offset, raw)` returns exactly what `SlimReader._prepare(offset, raw)` (the
 * pure-Python route, `ds4sessions.agents.pi.slim`) returns for the line: the tuple
 * (id, parentId, counted StandIn), or None, with the same side effects on the reader's
 * `_shared` dict, the ledger (`TokenLedger.counted`) and the counter (`Cl100kCounter._known`,
 * `encodes`). For a line it does not port it returns False ("not taken") BEFORE any side effect,
 * and the caller runs the Python route. Every function below mirrors one Python function; its
 * comment names it. What is handed back to Python (False): roles other than user / assistant /
 * toolResult in the LLM context with a count to make, images, content blocks whose part is the
 * block's JSON, an assistant string content, a toolCall without `arguments`, text/thinking
 * blocks without their string, an entry without a `message` key, counters or ledgers of other
 * types (the Python side only builds a Preparer for `Cl100kCounter` / `CharsV1Counter` and an
 * unchanged `TokenLedger.count_split`).
 *
 * Calls back into Python: `orjson.loads` (the parse), `ds4core.categories.js_stringify` for
 * tool-call arguments that are not "plain" (`ds4core.jsjson._plain`), `Cl100kCounter.text`
 * for a text with lone surrogates, and `Encoding.encode_ordinary` for the lines of a text the
 * memo does not know that `bpe_count` does not count itself (a line with a character outside
 * ASCII, a piece over 256 bytes, or every text when the encoding's ranks are not at hand).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <datetime.h>

/* ------------------------------------------------------------------ BLAKE2b (RFC 7693) */
/* `hashlib.blake2b(data, digest_size=16).digest()`: the key `Cl100kCounter.text` uses for a
 * text longer than `digest_above` characters (RFC 7693 reference algorithm, unkeyed). */

static const uint64_t blake2b_iv[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const uint8_t blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

#define ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define B2B_G(a, b, c, d, x, y)                 \
    do {                                        \
        v[a] = v[a] + v[b] + (x);               \
        v[d] = ROTR64(v[d] ^ v[a], 32);         \
        v[c] = v[c] + v[d];                     \
        v[b] = ROTR64(v[b] ^ v[c], 24);         \
        v[a] = v[a] + v[b] + (y);               \
        v[d] = ROTR64(v[d] ^ v[a], 16);         \
        v[c] = v[c] + v[d];                     \
        v[b] = ROTR64(v[b] ^ v[c], 63);         \
    } while (0)

static uint64_t load64_le(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static void blake2b_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last)
{
    uint64_t v[16], m[16];
    int i;
    for (i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = blake2b_iv[i];
    }
    v[12] ^= t;  /* the high 64 bits of the counter stay 0 (texts < 2**64 bytes) */
    if (last)
        v[14] = ~v[14];
    for (i = 0; i < 16; i++)
        m[i] = load64_le(block + 8 * i);
    for (i = 0; i < 12; i++) {
        const uint8_t *s = blake2b_sigma[i];
        B2B_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        B2B_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        B2B_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        B2B_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        B2B_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        B2B_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        B2B_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        B2B_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (i = 0; i < 8; i++)
        h[i] ^= v[i] ^ v[i + 8];
}

/* The 16-byte unkeyed BLAKE2b digest of `data[0:len]` into `out`. */
static void blake2b_16(const uint8_t *data, size_t len, uint8_t out[16])
{
    uint64_t h[8];
    uint8_t block[128];
    uint64_t t = 0;
    int i;
    for (i = 0; i < 8; i++)
        h[i] = blake2b_iv[i];
    h[0] ^= 0x01010000ULL ^ 16;  /* fanout 1, depth 1, no key, 16-byte digest */
    while (len > 128) {
        t += 128;
        blake2b_compress(h, data, t, 0);
        data += 128;
        len -= 128;
    }
    memset(block, 0, sizeof block);
    if (len)
        memcpy(block, data, len);
    t += len;
    blake2b_compress(h, block, t, 1);
    for (i = 0; i < 16; i++)
        out[i] = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
}

/* ------------------------------------------------------------------ module state */

#define MAX_SAFE_F 9007199254740992.0      /* schema.MAX_SAFE = 2**53 */
#define MAX_SAFE_I 9007199254740992LL
#define MAX_DATE_MS_I 8640000000000000LL   /* schema.MAX_DATE_MS = 8.64e15 (an integer) */
#define MAX_DATE_MS_F 8.64e15
#define JS_MAX_SAFE_INTEGER 9007199254740991LL  /* jsjson._MAX_SAFE_INTEGER */
#define PREVIEW_KEPT 81                    /* slim.PREVIEW_KEPT */
#define CL100K_CHUNK_CHARS 64000           /* tokens.CL100K_CHUNK_CHARS */
#define CL100K_MESSAGE_OVERHEAD 4          /* tokens.CL100K_MESSAGE_OVERHEAD */
#define MESSAGE_WRAPPER_TOKENS 8           /* estimate.MESSAGE_WRAPPER_TOKENS */
#define CONTENT_BLOCK_WRAPPER_TOKENS 4     /* estimate.CONTENT_BLOCK_WRAPPER_TOKENS */

/* Key codes: one table of every key name a rule reads (entry, message, block, usage, cost). */
enum {
    K_NONE = 0,
    K_TYPE, K_ID, K_PARENTID, K_TIMESTAMP, K_MESSAGE,
    K_ROLE, K_PROVIDER, K_MODEL, K_API, K_STOPREASON, K_ERRORMESSAGE, K_TOOLCALLID, K_TOOLNAME,
    K_COMMAND, K_OUTPUT, K_CUSTOMTYPE, K_FULLOUTPUTPATH,
    K_SUMMARY, K_CONTENT, K_USAGE, K_EXITCODE,
    K_NAME, K_MIMETYPE, K_DATA, K_TEXT, K_THINKING, K_ARGUMENTS,
    K_INPUT, K_CACHEREAD, K_CACHEWRITE, K_TOTALTOKENS, K_CACHEWRITE1H, K_COST, K_TOTAL,
    K_COUNT
};

static const char *key_names[K_COUNT] = {
    NULL,
    "type", "id", "parentId", "timestamp", "message",
    "role", "provider", "model", "api", "stopReason", "errorMessage", "toolCallId", "toolName",
    "command", "output", "customType", "fullOutputPath",
    "summary", "content", "usage", "exitCode",
    "name", "mimeType", "data", "text", "thinking", "arguments",
    "input", "cacheRead", "cacheWrite", "totalTokens", "cacheWrite1h", "cost", "total",
};

static PyObject *key_str[K_COUNT];   /* interned names */
static PyObject *key_codes;          /* dict: name -> code (a Python int) */

/* Other constant strings. */
static PyObject *s_message, *s_details, *s_isError, *s_user, *s_assistant, *s_toolResult,
    *s_toolCall, *s_image, *s_bashExecution, *s_excludeFromContext, *s_counted, *s_encodes,
    *s_assistant_text, *s_tool_calls, *s_tool_results, *s_other, *s_question, *s_empty,
    *s_image_preview, *s_encode_ordinary, *s_encoding, *s_text_method;
static PyObject *context_roles;
static PyObject *one;                /* the int 1 */
static PyObject *zero;               /* the int 0 */
static PyObject *no_calls;           /* an empty frozenset (`context._NO_CALLS`) */
static PyObject *s_compaction, *s_system;      /* frozenset: in_llm_context's roles */
/* The reader attributes a block reads and sets (`block_open`, `block_finish`). */
static PyObject *s_entries, *s_by_id, *s_diagnostics, *s_missing_parents, *s_leaf_id, *s_last_line_no,
    *s_end_offset;

/* The code of a dict key (K_NONE for a name no rule reads); -1 with an exception set. */
static int key_code(PyObject *key)
{
    PyObject *code = PyDict_GetItemWithError(key_codes, key);
    if (code == NULL)
        return PyErr_Occurred() ? -1 : K_NONE;
    return (int)PyLong_AsLong(code);
}

/* ------------------------------------------------------------------ schema rules */

/* `schema._number_conforms`: an exact int or float with |value| <= 2**53 (NaN fails). */
static int number_conforms(PyObject *value)
{
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow)
            return 0;
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return x >= -MAX_SAFE_I && x <= MAX_SAFE_I;
    }
    if (PyFloat_CheckExact(value))
        return fabs(PyFloat_AS_DOUBLE(value)) <= MAX_SAFE_F;
    return 0;
}

/* `value >= 0` for a value `number_conforms` accepted. */
static int number_nonnegative(PyObject *value)
{
    if (PyLong_CheckExact(value))
        return PyLong_AsLongLong(value) >= 0;  /* within 2**53: no overflow */
    return PyFloat_AS_DOUBLE(value) >= 0.0;
}

/* `schema._optional_str`. */
static int optional_str(PyObject *value)
{
    return value == Py_None || PyUnicode_CheckExact(value);
}

/* `schema._timestamp`: None, a string, or a conforming number with |value| <= 8.64e15. */
static int timestamp_conforms(PyObject *value)
{
    if (value == Py_None || PyUnicode_CheckExact(value))
        return 1;
    if (!number_conforms(value))
        return 0;
    if (PyLong_CheckExact(value)) {
        long long x = PyLong_AsLongLong(value);  /* within 2**53: no overflow */
        return x >= -MAX_DATE_MS_I && x <= MAX_DATE_MS_I;
    }
    return fabs(PyFloat_AS_DOUBLE(value)) <= MAX_DATE_MS_F;
}

/* `schema._content_conforms`: None, a string, or a list of dicts whose block fields have
 * their types (`_BLOCK_STR`: None or str; `arguments`: dict; `text`, `thinking`: str).
 * 1 / 0, -1 with an exception set. */
static int content_conforms(PyObject *content)
{
    Py_ssize_t i, n;
    if (content == Py_None || PyUnicode_CheckExact(content))
        return 1;
    if (!PyList_CheckExact(content))
        return 0;
    n = PyList_GET_SIZE(content);
    for (i = 0; i < n; i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *key, *value;
        Py_ssize_t pos = 0;
        if (!PyDict_CheckExact(block))
            return 0;
        while (PyDict_Next(block, &pos, &key, &value)) {
            int code = key_code(key);
            switch (code) {
            case -1:
                return -1;
            case K_TYPE: case K_ID: case K_NAME: case K_MIMETYPE: case K_DATA:
                if (!optional_str(value))
                    return 0;
                break;
            case K_ARGUMENTS:
                if (!PyDict_CheckExact(value))
                    return 0;
                break;
            case K_TEXT: case K_THINKING:
                if (!PyUnicode_CheckExact(value))
                    return 0;
                break;
            default:
                break;
            }
        }
    }
    return 1;
}

/* `schema._usage_conforms`: a dict whose counts are conforming numbers >= 0 and whose `cost`
 * (when present) is a dict of conforming numbers. 1 / 0, -1 with an exception set. */
static int usage_conforms(PyObject *usage)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (!PyDict_CheckExact(usage))
        return 0;
    while (PyDict_Next(usage, &pos, &key, &value)) {
        int code = key_code(key);
        switch (code) {
        case -1:
            return -1;
        case K_INPUT: case K_OUTPUT: case K_CACHEREAD: case K_CACHEWRITE: case K_TOTALTOKENS: case K_CACHEWRITE1H:
            if (!number_conforms(value) || !number_nonnegative(value))
                return 0;
            break;
        case K_COST: {
            PyObject *ckey, *cvalue;
            Py_ssize_t cpos = 0;
            if (!PyDict_CheckExact(value))
                return 0;
            while (PyDict_Next(value, &cpos, &ckey, &cvalue)) {
                int ccode = key_code(ckey);
                if (ccode == -1)
                    return -1;
                if ((ccode == K_INPUT || ccode == K_OUTPUT || ccode == K_CACHEREAD ||
                     ccode == K_CACHEWRITE || ccode == K_TOTAL) && !number_conforms(cvalue))
                    return 0;
            }
            break;
        }
        default:
            break;
        }
    }
    return 1;
}

/* `schema._message_conforms`: every field of `_MESSAGE_CHECKS` present has its type.
 * 1 / 0, -1 with an exception set. */
static int message_conforms(PyObject *message)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int ok;
    while (PyDict_Next(message, &pos, &key, &value)) {
        int code = key_code(key);
        switch (code) {
        case -1:
            return -1;
        case K_ROLE: case K_PROVIDER: case K_MODEL: case K_API: case K_STOPREASON:
        case K_ERRORMESSAGE: case K_TOOLCALLID: case K_TOOLNAME: case K_COMMAND: case K_OUTPUT:
        case K_CUSTOMTYPE: case K_FULLOUTPUTPATH:
            if (!optional_str(value))
                return 0;
            break;
        case K_SUMMARY:
            if (!PyUnicode_CheckExact(value))
                return 0;
            break;
        case K_CONTENT:
            ok = content_conforms(value);
            if (ok <= 0)
                return ok;
            break;
        case K_USAGE:
            ok = usage_conforms(value);
            if (ok <= 0)
                return ok;
            break;
        case K_TIMESTAMP:
            if (!timestamp_conforms(value))
                return 0;
            break;
        case K_EXITCODE:
            if (value != Py_None && !number_conforms(value))
                return 0;
            break;
        default:
            break;
        }
    }
    return 1;
}

/* `schema.has_surrogate_escape`: the bytes hold `\u` + [dD] + [89a-fA-F]. */
static int has_surrogate_escape(const char *p, Py_ssize_t n)
{
    const char *end = p + n, *q = p;
    while (end - q >= 4) {
        const char *hit = memchr(q, '\\', (size_t)(end - q - 3));
        char c;
        if (hit == NULL)
            return 0;
        c = hit[3];
        if (hit[1] == 'u' && (hit[2] == 'd' || hit[2] == 'D') &&
            ((c >= '8' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return 1;
        q = hit + 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ strings */

/* `ds4core.jsjson.utf16_len`: JavaScript's `s.length`. */
static Py_ssize_t utf16_len(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i, extra = 0;
    if (PyUnicode_KIND(s) == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *data = PyUnicode_4BYTE_DATA(s);
        for (i = 0; i < n; i++)
            extra += data[i] > 0xFFFF;
    }
    return n + extra;
}

/* `estimate.text_tokens` = `CharsV1Counter.text`: ceil(UTF-16 length / 4), 0 when empty. */
static long long chars_text_tokens(PyObject *s)
{
    Py_ssize_t n = utf16_len(s);
    return n ? (n + 3) / 4 : 0;
}

/* A growable byte buffer (UTF-8 text under construction). */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (n == 0)
        return 0;  /* (memcpy to the NULL of an empty buffer is undefined even for 0 bytes: UBSan) */
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->len + n)
            cap *= 2;
        p = PyMem_Realloc(b->p, (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* ------------------------------------------------------------------ JSON.stringify */

/* The JSON text of a string as `json.JSONEncoder(ensure_ascii=False)` writes it (= JavaScript's
 * `JSON.stringify` for a string without lone surrogates: `"`, `\` and C0 controls escaped,
 * `\u00XX` in lowercase hex). 1 written, 0 not plain (a lone surrogate), -1 error. */
static int js_quote(Buf *b, PyObject *s)
{
    static const char hex[] = "0123456789abcdef";
    Py_ssize_t n, i, start = 0;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();  /* lone surrogates: JavaScript escapes them; the exact path decides */
        return 0;
    }
    if (buf_put(b, "\"", 1) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        char esc[6];
        Py_ssize_t k = 2;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (buf_put(b, u + start, i - start) < 0)
            return -1;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0'; esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            k = 6;
        }
        if (buf_put(b, esc, k) < 0)
            return -1;
        start = i + 1;
    }
    if (buf_put(b, u + start, n - start) < 0 || buf_put(b, "\"", 1) < 0)
        return -1;
    return 1;
}

/* `ds4core.jsjson.stringify` for a value `_plain` accepts: None, bools, strings, ints within
 * ±(2**53 - 1), dicts with string keys that do not start with a digit (`str.isdigit`: a key
 * that may be an array index, which JavaScript orders first, is not plain here) and lists of
 * those. 1 written, 0 not plain (the caller uses the Python function), -1 error. */
static int js_stringify_plain(Buf *b, PyObject *value)
{
    if (value == Py_None)
        return buf_put(b, "null", 4) < 0 ? -1 : 1;
    if (value == Py_True)
        return buf_put(b, "true", 4) < 0 ? -1 : 1;
    if (value == Py_False)
        return buf_put(b, "false", 5) < 0 ? -1 : 1;
    if (PyUnicode_CheckExact(value))
        return js_quote(b, value);
    if (PyLong_CheckExact(value)) {
        int overflow;
        char digits[32];
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || x < -JS_MAX_SAFE_INTEGER || x > JS_MAX_SAFE_INTEGER)
            return 0;
        return buf_put(b, digits, snprintf(digits, sizeof digits, "%lld", x)) < 0 ? -1 : 1;
    }
    if (PyDict_CheckExact(value)) {
        PyObject *key, *member;
        Py_ssize_t pos = 0;
        int first = 1, r;
        if (buf_put(b, "{", 1) < 0)
            return -1;
        while (PyDict_Next(value, &pos, &key, &member)) {
            if (!PyUnicode_CheckExact(key))
                return 0;
            if (PyUnicode_GET_LENGTH(key) && Py_UNICODE_ISDIGIT(PyUnicode_READ_CHAR(key, 0)))
                return 0;
            if (!first && buf_put(b, ",", 1) < 0)
                return -1;
            first = 0;
            r = js_quote(b, key);
            if (r <= 0)
                return r;
            if (buf_put(b, ":", 1) < 0)
                return -1;
            r = js_stringify_plain(b, member);
            if (r <= 0)
                return r;
        }
        return buf_put(b, "}", 1) < 0 ? -1 : 1;
    }
    if (PyList_CheckExact(value)) {
        Py_ssize_t i, n = PyList_GET_SIZE(value);
        int r;
        if (buf_put(b, "[", 1) < 0)
            return -1;
        for (i = 0; i < n; i++) {
            if (i && buf_put(b, ",", 1) < 0)
                return -1;
            r = js_stringify_plain(b, PyList_GET_ITEM(value, i));
            if (r <= 0)
                return r;
        }
        return buf_put(b, "]", 1) < 0 ? -1 : 1;
    }
    return 0;  /* floats, big ints, other types: the exact path */
}

/* ------------------------------------------------------------------ the preparer */

enum { COUNTER_CL100K = 1, COUNTER_CHARS_V1 = 2 };

/* The fields of `entries.Entry` a block sets (`block_insert`), in slot order of this list. */
enum { E_TYPE, E_ID, E_PARENT_ID, E_TIMESTAMP, E_RAW, E_LINE_NO, E_OFFSET, E_LENGTH, E_COUNT };
static const char *entry_fields[E_COUNT] = {"type", "id", "parent_id", "timestamp", "raw", "line_no", "offset",
                                            "length"};


typedef struct {
    PyObject_HEAD
    PyObject *loads;            /* orjson.loads */
    PyObject *decode_error;     /* orjson.JSONDecodeError */
    PyObject *standin;          /* entries.StandIn */
    PyObject *part_count;       /* tokens.PartCount */
    PyObject *message_count;    /* tokens.MessageCount */
    PyObject *shared;           /* the reader's `_shared` dict */
    PyObject *ledger;           /* the reader's ledger (a TokenLedger) */
    PyObject *counter;          /* ledger.counter */
    PyObject *counter_name;     /* counter.name */
    PyObject *known;            /* Cl100kCounter._known, else NULL */
    PyObject *encode;           /* counter._encoding.encode_ordinary, fetched on first use */
    PyObject *js_stringify;     /* ds4core.categories.js_stringify */
    int kind;                   /* COUNTER_CL100K / COUNTER_CHARS_V1 */
    Py_ssize_t digest_above;    /* Cl100kCounter._digest_above, -1 for None */
    Py_ssize_t max_line_bytes;  /* limits.MAX_LINE_BYTES */
    Py_ssize_t max_depth;       /* limits.MAX_DEPTH */
    Py_ssize_t defer_bytes;     /* slim.DEFER_BYTES */
    Py_ssize_t taken;           /* lines answered with a tuple */
    Py_ssize_t rejected;        /* lines answered with None */
    Py_ssize_t handed_back;     /* lines answered with False (the Python route runs) */
    Py_ssize_t pending_encodes; /* counter.encodes + this, written by `flush_pending` */
    Py_ssize_t pending_counted; /* ledger.counted + this, likewise */
    int encoded;                /* `count_split`: a text of this message went through the tokenizer */
    PyObject *entry_type;       /* the entry type of the last block (`block_open`), else NULL */
    Py_ssize_t entry_offsets[E_COUNT]; /* its slots' byte offsets (`slot_layout`) */
} Preparer;

/* attribute += n (a Python int attribute); -1 with an exception. */
static int add_to_attr(PyObject *owner, PyObject *name, Py_ssize_t n)
{
    PyObject *was, *delta, *more;
    int r;
    was = PyObject_GetAttr(owner, name);
    if (was == NULL)
        return -1;
    delta = PyLong_FromSsize_t(n);
    more = delta ? PyNumber_Add(was, delta) : NULL;
    Py_DECREF(was);
    Py_XDECREF(delta);
    if (more == NULL)
        return -1;
    r = PyObject_SetAttr(owner, name, more);
    Py_DECREF(more);
    return r;
}

/* Write the counts kept in C since the last call (`counter.encodes`, `ledger.counted`: one
 * attribute update per call instead of two per message). Every entry point calls it before it
 * returns (an exception set is kept), and `python_text` before Python counts a text, so Python
 * code never sees them behind. -1 with an exception (when none was set before). */
static int flush_pending(PyObject *preparer)
{
    Preparer *self = (Preparer *)preparer;
    PyObject *type, *value, *traceback;
    int r = 0;
    if (self->pending_encodes == 0 && self->pending_counted == 0)
        return 0;
    PyErr_Fetch(&type, &value, &traceback);
    if (self->pending_encodes && add_to_attr(self->counter, s_encodes, self->pending_encodes) < 0)
        r = -1;
    else if (self->pending_counted && add_to_attr(self->ledger, s_counted, self->pending_counted) < 0)
        r = -1;
    self->pending_encodes = self->pending_counted = 0;
    if (type != NULL) {
        if (r < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, traceback);
    }
    return r;
}

/* One part of `message_parts`: (category, child, payload) and its tokens. `category` and
 * `child` are borrowed (constants or strings of the message), `payload` is owned. */
typedef struct {
    PyObject *category;
    PyObject *child;
    PyObject *payload;
    long long tokens;
} Part;

typedef struct {
    Part *items;
    Py_ssize_t n, cap;
} Parts;

static void parts_clear(Parts *parts)
{
    Py_ssize_t i;
    for (i = 0; i < parts->n; i++)
        Py_XDECREF(parts->items[i].payload);
    PyMem_Free(parts->items);
    parts->items = NULL;
    parts->n = parts->cap = 0;
}

/* Append a part; steals `payload`. */
static int parts_add(Parts *parts, PyObject *category, PyObject *child, PyObject *payload)
{
    if (payload == NULL)
        return -1;
    if (parts->n == parts->cap) {
        Py_ssize_t cap = parts->cap ? parts->cap * 2 : 4;
        Part *items = PyMem_Realloc(parts->items, (size_t)cap * sizeof(Part));
        if (items == NULL) {
            Py_DECREF(payload);
            PyErr_NoMemory();
            return -1;
        }
        parts->items = items;
        parts->cap = cap;
    }
    parts->items[parts->n].category = category;
    parts->items[parts->n].child = child;
    parts->items[parts->n].payload = payload;
    parts->items[parts->n].tokens = 0;
    parts->n++;
    return 0;
}

/* `dict.get(key)` with a borrowed result (NULL when absent, or with an exception set). */
static PyObject *get(PyObject *dict, int code)
{
    return PyDict_GetItemWithError(dict, key_str[code]);
}

/* Equality of a string with a constant (both exact str). */
static int str_is(PyObject *value, PyObject *constant)
{
    if (value == constant)
        return 1;
    if (value == NULL || !PyUnicode_CheckExact(value))
        return 0;
    return PyUnicode_GET_LENGTH(value) == PyUnicode_GET_LENGTH(constant) &&
           PyUnicode_KIND(value) == PyUnicode_KIND(constant) &&
           memcmp(PyUnicode_DATA(value), PyUnicode_DATA(constant),
                  (size_t)(PyUnicode_GET_LENGTH(value) * PyUnicode_KIND(value))) == 0;
}

/* `categories.in_llm_context`. 1 / 0, -1 with an exception set. */
static int in_llm_context(PyObject *message, PyObject *role)
{
    if (str_is(role, s_bashExecution)) {
        PyObject *exclude = PyDict_GetItemWithError(message, s_excludeFromContext);
        if (exclude == NULL)
            return PyErr_Occurred() ? -1 : 1;
        int truth = PyObject_IsTrue(exclude);
        return truth < 0 ? -1 : !truth;
    }
    if (role == NULL || !PyUnicode_CheckExact(role))
        return 0;  /* None (or no role) is no context role */
    return PySet_Contains(context_roles, role);
}

/* The block's `type` is `constant` (`block.get("type") == constant`). */
static int block_type_is(PyObject *block, PyObject *constant, int *error)
{
    PyObject *kind = get(block, K_TYPE);
    if (kind == NULL && PyErr_Occurred()) {
        *error = 1;
        return 0;
    }
    return str_is(kind, constant);
}

/* `categories._content_parts` for the content of a user or tool-result message with a count
 * to make: a string is one part; a list gives one part per `{"type": "text", "text": str}`
 * block. 1 done, 0 not ported (an image, a block whose part is its JSON), -1 error. */
static int content_parts(PyObject *content, PyObject *category, PyObject *child, Parts *parts)
{
    Py_ssize_t i, n;
    if (content == NULL)
        return 1;  /* no content: `content or ()` gives no part */
    if (PyUnicode_CheckExact(content)) {
        Py_INCREF(content);
        return parts_add(parts, category, child, content) < 0 ? -1 : 1;
    }
    /* conforming: a list of dicts (None was kept whole by `stand_in`) */
    n = PyList_GET_SIZE(content);
    for (i = 0; i < n; i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *text;
        int error = 0;
        if (!block_type_is(block, key_str[K_TEXT], &error))
            return error ? -1 : 0;  /* an image or another kind: the Python route */
        text = get(block, K_TEXT);
        if (text == NULL)
            return PyErr_Occurred() ? -1 : 0;  /* no text: its JSON is the part */
        Py_INCREF(text);  /* a str: the message conforms */
        if (parts_add(parts, category, child, text) < 0)
            return -1;
    }
    return 1;
}

/* `categories.message_parts` for an assistant message: one part per text, thinking or
 * toolCall block (payload = name + `js_stringify(arguments)`), `("assistant_text", None, "")`
 * without any. 1 done, 0 not ported, -1 error. */
static int assistant_parts(Preparer *self, PyObject *content, Parts *parts)
{
    Py_ssize_t i, n;
    if (content != NULL) {
        if (!PyList_CheckExact(content))
            return 0;  /* a string: each character is a block (its JSON); the Python route */
        n = PyList_GET_SIZE(content);
        for (i = 0; i < n; i++) {
            PyObject *block = PyList_GET_ITEM(content, i), *kind;
            kind = get(block, K_TYPE);
            if (kind == NULL && PyErr_Occurred())
                return -1;
            if (str_is(kind, key_str[K_TEXT]) || str_is(kind, key_str[K_THINKING])) {
                int code = str_is(kind, key_str[K_TEXT]) ? K_TEXT : K_THINKING;
                PyObject *text = get(block, code);
                if (text == NULL)
                    return PyErr_Occurred() ? -1 : 0;  /* `str(block.get(...,""))`: estimate differs */
                Py_INCREF(text);
                if (parts_add(parts, code == K_TEXT ? s_assistant_text : key_str[K_THINKING], Py_None, text) < 0)
                    return -1;
            } else if (str_is(kind, s_toolCall)) {
                PyObject *name = get(block, K_NAME), *arguments, *payload;
                Buf b = {NULL, 0, 0};
                int r;
                if (name == NULL && PyErr_Occurred())
                    return -1;
                if (name == NULL || !PyUnicode_CheckExact(name))
                    name = s_empty;
                arguments = get(block, K_ARGUMENTS);
                if (arguments == NULL)
                    return PyErr_Occurred() ? -1 : 0;  /* "null" here, "" in estimate: Python */
                /* name + js_stringify(arguments) */
                {
                    Py_ssize_t name_len;
                    const char *name_utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
                    if (name_utf8 == NULL) {
                        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                            return -1;
                        PyErr_Clear();
                        r = 0;
                    } else {
                        r = buf_put(&b, name_utf8, name_len) < 0 ? -1 : js_stringify_plain(&b, arguments);
                    }
                }
                if (r < 0) {
                    PyMem_Free(b.p);
                    return -1;
                }
                if (r == 1) {
                    payload = PyUnicode_DecodeUTF8(b.p, b.len, NULL);
                } else {
                    PyObject *json = PyObject_CallOneArg(self->js_stringify, arguments);
                    payload = json == NULL ? NULL : PyUnicode_Concat(name, json);
                    Py_XDECREF(json);
                }
                PyMem_Free(b.p);
                if (parts_add(parts, s_tool_calls, PyUnicode_GET_LENGTH(name) ? name : s_question, payload) < 0)
                    return -1;
            } else {
                return 0;  /* another kind: its JSON is the part */
            }
        }
    }
    if (parts->n == 0) {
        Py_INCREF(s_empty);
        if (parts_add(parts, s_assistant_text, Py_None, s_empty) < 0)
            return -1;
    }
    return 1;
}

/* `categories.message_parts` for the roles ported (user, assistant, toolResult).
 * 1 done, 0 not ported, -1 error. */
static int message_parts(Preparer *self, PyObject *message, PyObject *role, Parts *parts)
{
    PyObject *content = get(message, K_CONTENT);
    if (content == NULL && PyErr_Occurred())
        return -1;
    if (str_is(role, s_user))
        return content_parts(content, s_user, Py_None, parts);
    if (str_is(role, s_assistant))
        return assistant_parts(self, content, parts);
    if (str_is(role, s_toolResult)) {
        PyObject *name = get(message, K_TOOLNAME);
        int r;
        if (name == NULL && PyErr_Occurred())
            return -1;
        if (name == NULL || !PyUnicode_CheckExact(name))
            name = s_question;
        r = content_parts(content, s_tool_results, name, parts);
        if (r == 1 && parts->n == 0) {
            Py_INCREF(s_empty);
            if (parts_add(parts, s_tool_results, name, s_empty) < 0)
                return -1;
        }
        return r;
    }
    return 0;
}

/* `estimate.message_tokens` of a message whose parts are `parts` (ported roles only: a string
 * content is the one part, a list content has one part per block, each a text, thinking or
 * toolCall block with its string: `text_tokens(payload) + 4` each, as `_content_tokens`). */
static long long chars_message_tokens(PyObject *message, PyObject *role, const Parts *parts)
{
    static const int fields[] = {K_SUMMARY, K_COMMAND, K_OUTPUT, K_TOOLNAME};
    long long total = MESSAGE_WRAPPER_TOKENS;
    PyObject *content = get(message, K_CONTENT);
    size_t i;
    if (role != NULL && PyUnicode_CheckExact(role))
        total += chars_text_tokens(role);
    if (content != NULL) {
        if (PyUnicode_CheckExact(content)) {
            total += chars_text_tokens(content);
        } else {
            Py_ssize_t k, n = PyList_GET_SIZE(content);
            for (k = 0; k < n; k++)
                total += chars_text_tokens(parts->items[k].payload) + CONTENT_BLOCK_WRAPPER_TOKENS;
        }
    }
    for (i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        PyObject *value = get(message, fields[i]);
        if (value != NULL && PyUnicode_CheckExact(value))
            total += chars_text_tokens(value);
    }
    return total;
}

/* `int(value)` of a memo's count. */
static int count_of(PyObject *value, long long *tokens)
{
    *tokens = PyLong_AsLongLong(value);
    return (*tokens == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* `counter.text(s)` by the Python method (its own memo and `encodes`), the counts kept in C
 * written first; `self->encoded` is set when it tokenized (`encodes` changed). */
static int python_text(Preparer *self, PyObject *s, long long *tokens)
{
    PyObject *before, *after, *result;
    int r;
    if (flush_pending((PyObject *)self) < 0)
        return -1;
    before = PyObject_GetAttr(self->counter, s_encodes);
    if (before == NULL)
        return -1;
    result = PyObject_CallMethodOneArg(self->counter, s_text_method, s);
    after = result ? PyObject_GetAttr(self->counter, s_encodes) : NULL;
    r = after ? PyObject_RichCompareBool(after, before, Py_NE) : -1;
    Py_DECREF(before);
    Py_XDECREF(after);
    if (r > 0)
        self->encoded = 1;
    if (r >= 0)
        r = count_of(result, tokens);
    Py_XDECREF(result);
    return r;
}

/* ---- cl100k counted in C for ASCII text ----------------------------------------------------
 * tiktoken's `encode_ordinary` for `cl100k_base` (tiktoken 0.14: src/lib.rs `encode_ordinary`,
 * `byte_pair_encode`, `_byte_pair_merge`), counted without building the ids, for a text that is
 * all ASCII: its pattern (`CL100K_PATTERN` below, checked equal to the encoding's own) split by
 * hand, each piece one token when it is a token, else merged pair by pair (the lowest rank
 * first, the leftmost of equal ranks) as `_byte_pair_merge` merges. The merge ranks come from
 * the encoding (`set_cl100k_ranks`). A text with a byte over 127, or a piece longer than
 * `BPE_MAX_PIECE` bytes, is left to tiktoken (-2). tests/sessions/test_bpe_count.py compares
 * the counts with tiktoken's on every sample's texts and on generated ones. */

#define BPE_MAX_PIECE 256
#define BPE_NONE UINT32_MAX

static struct {
    uint32_t mask;             /* slots - 1 (a power of two minus one), 0 when not loaded */
    uint32_t *slot_entry;      /* entry index + 1 per slot, 0 for an empty slot */
    uint32_t *offset, *length, *rank;  /* per entry: its bytes in `bytes`, its rank */
    unsigned char *bytes;
} bpe;

static uint32_t bpe_hash(const unsigned char *p, Py_ssize_t n)
{
    uint32_t h = 2166136261u;  /* FNV-1a */
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* The rank of the byte string p[0:n], or BPE_NONE when it is not a token. */
static uint32_t bpe_rank(const unsigned char *p, Py_ssize_t n)
{
    uint32_t i = bpe_hash(p, n) & bpe.mask, e;
    while ((e = bpe.slot_entry[i]) != 0) {
        e--;
        if (bpe.length[e] == (uint32_t)n && memcmp(bpe.bytes + bpe.offset[e], p, (size_t)n) == 0)
            return bpe.rank[e];
        i = (i + 1) & bpe.mask;
    }
    return BPE_NONE;
}

static void bpe_free(void)
{
    PyMem_Free(bpe.slot_entry);
    PyMem_Free(bpe.offset);
    PyMem_Free(bpe.length);
    PyMem_Free(bpe.rank);
    PyMem_Free(bpe.bytes);
    memset(&bpe, 0, sizeof bpe);
}

/* `set_cl100k_ranks(ranks)`: load the merge ranks ({bytes: int}, tiktoken's `_mergeable_ranks`,
 * or a list of bytes in rank order, as `ds4sessions.tokencache` keeps them) for `bpe_count`, or
 * with None unload them (tiktoken counts every text again). Raises TypeError / ValueError for
 * anything else (nothing is loaded then). */
static PyObject *py_set_cl100k_ranks(PyObject *module, PyObject *ranks)
{
    Py_ssize_t n, pos = 0, total = 0, k = 0;
    PyObject *key, *value;
    uint32_t slots = 1;
    if (ranks == Py_None) {
        bpe_free();
        Py_RETURN_NONE;
    }
    if (PyList_CheckExact(ranks)) {  /* tokens in rank order */
        n = PyList_GET_SIZE(ranks);
        for (k = 0; k < n; k++) {
            key = PyList_GET_ITEM(ranks, k);
            if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) == 0) {
                PyErr_SetString(PyExc_TypeError, "set_cl100k_ranks: a list of bytes");
                return NULL;
            }
            total += PyBytes_GET_SIZE(key);
        }
        k = 0;
    } else if (PyDict_Check(ranks)) {
        n = PyDict_GET_SIZE(ranks);
        while (PyDict_Next(ranks, &pos, &key, &value)) {
            if (!PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) == 0 || !PyLong_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "set_cl100k_ranks: a dict of bytes to ranks");
                return NULL;
            }
            total += PyBytes_GET_SIZE(key);
        }
    } else {
        PyErr_SetString(PyExc_TypeError, "set_cl100k_ranks: a dict of bytes to ranks");
        return NULL;
    }
    if (n == 0 || n > (1 << 24) || total > ((Py_ssize_t)1 << 30)) {
        PyErr_SetString(PyExc_ValueError, "set_cl100k_ranks: an empty or oversized table");
        return NULL;
    }
    bpe_free();
    while (slots < 2 * (uint32_t)n)
        slots <<= 1;
    bpe.slot_entry = PyMem_Calloc(slots, sizeof(uint32_t));
    bpe.offset = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    bpe.length = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    bpe.rank = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    bpe.bytes = PyMem_Malloc((size_t)total);
    if (!bpe.slot_entry || !bpe.offset || !bpe.length || !bpe.rank || !bpe.bytes) {
        bpe_free();
        return PyErr_NoMemory();
    }
    bpe.mask = slots - 1;
    pos = 0;
    total = 0;
    while (PyList_CheckExact(ranks) ? k < n : PyDict_Next(ranks, &pos, &key, &value)) {
        Py_ssize_t len;
        const unsigned char *p;
        long long rank;
        uint32_t i;
        if (PyList_CheckExact(ranks)) {
            key = PyList_GET_ITEM(ranks, k);
            rank = k;
        } else {
            rank = PyLong_AsLongLong(value);
        }
        len = PyBytes_GET_SIZE(key);
        p = (const unsigned char *)PyBytes_AS_STRING(key);
        if ((rank == -1 && PyErr_Occurred()) || rank < 0 || rank >= BPE_NONE) {
            bpe_free();
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "set_cl100k_ranks: a rank out of range");
            return NULL;
        }
        memcpy(bpe.bytes + total, p, (size_t)len);
        bpe.offset[k] = (uint32_t)total;
        bpe.length[k] = (uint32_t)len;
        bpe.rank[k] = (uint32_t)rank;
        i = bpe_hash(p, len) & bpe.mask;
        while (bpe.slot_entry[i] != 0)
            i = (i + 1) & bpe.mask;
        bpe.slot_entry[i] = (uint32_t)k + 1;
        total += len;
        k++;
    }
    Py_RETURN_NONE;
}

/* The pattern `bpe_match` splits by: tiktoken 0.14's `cl100k_base` `pat_str`. */
static const char CL100K_PATTERN[] =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|"
    "\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

/* `use_cl100k(encoding)`: load `encoding._mergeable_ranks` for `bpe_count` when its `_pat_str`
 * is `CL100K_PATTERN` (once: True when loaded, now or before; False when it cannot be: another
 * pattern, no ranks, e.g. dropped by `mapjson._load_cl100k_lean` before this was called, or
 * ranks `set_cl100k_ranks` refuses: an empty token, a rank out of range). */
static PyObject *py_use_cl100k(PyObject *module, PyObject *encoding)
{
    PyObject *pattern, *ranks, *done;
    int same;
    if (bpe.mask != 0)
        Py_RETURN_TRUE;
    pattern = PyObject_GetAttrString(encoding, "_pat_str");
    if (pattern == NULL)
        return NULL;
    same = PyUnicode_Check(pattern) && PyUnicode_CompareWithASCIIString(pattern, CL100K_PATTERN) == 0;
    Py_DECREF(pattern);
    if (!same)
        Py_RETURN_FALSE;
    ranks = PyObject_GetAttrString(encoding, "_mergeable_ranks");
    if (ranks == NULL)
        return NULL;
    if (!((PyDict_Check(ranks) && PyDict_GET_SIZE(ranks) > 0) || (PyList_CheckExact(ranks) && PyList_GET_SIZE(ranks) > 0))) {
        Py_DECREF(ranks);
        Py_RETURN_FALSE;
    }
    done = py_set_cl100k_ranks(module, ranks);
    Py_DECREF(ranks);
    if (done == NULL) {  /* ranks of another shape (a damaged cache file): tiktoken counts */
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    Py_DECREF(done);
    Py_RETURN_TRUE;
}

/* Tokens of one piece of `byte_pair_encode` (its length 1..BPE_MAX_PIECE). */
static Py_ssize_t bpe_piece(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t start[BPE_MAX_PIECE + 2], parts, i, best;
    uint32_t rank[BPE_MAX_PIECE + 2], min;
    if (n == 1 || bpe_rank(p, n) != BPE_NONE)
        return 1;
    /* `_byte_pair_merge`: parts (start, rank of the pair starting there) */
    for (i = 0; i < n - 1; i++) {
        start[i] = i;
        rank[i] = bpe_rank(p + i, 2);
    }
    start[n - 1] = n - 1;
    rank[n - 1] = BPE_NONE;
    start[n] = n;
    rank[n] = BPE_NONE;
    parts = n + 1;
    for (;;) {
        min = BPE_NONE;
        best = -1;
        for (i = 0; i < parts - 1; i++)
            if (rank[i] < min) {
                min = rank[i];
                best = i;
            }
        if (best < 0)
            break;
        /* merge parts best and best + 1; then the ranks of the pairs at best - 1 and best */
        memmove(start + best + 1, start + best + 2, (size_t)(parts - best - 2) * sizeof start[0]);
        memmove(rank + best + 1, rank + best + 2, (size_t)(parts - best - 2) * sizeof rank[0]);
        parts--;
        if (best > 0)
            rank[best - 1] = best + 1 < parts ? bpe_rank(p + start[best - 1], start[best + 1] - start[best - 1]) : BPE_NONE;
        rank[best] = best + 2 < parts ? bpe_rank(p + start[best], start[best + 2] - start[best]) : BPE_NONE;
    }
    return parts - 1;
}

static inline int bpe_letter(unsigned char c) { return (unsigned char)((c | 32) - 'a') < 26; }
static inline int bpe_digit(unsigned char c) { return (unsigned char)(c - '0') < 10; }
static inline int bpe_space(unsigned char c) { return c == ' ' || (unsigned char)(c - 9) < 5; }
static inline int bpe_other(unsigned char c) { return !bpe_space(c) && !bpe_letter(c) && !bpe_digit(c); }

/* The length of the cl100k pattern's match at s[p] (s[0:n] ASCII, p < n):
 * '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
 * (alternatives in order, the first that matches; in ASCII \p{L} is [A-Za-z], \p{N} [0-9], \s
 * [\t\n\v\f\r ]). Every position matches one (the pieces cover the text). */
static Py_ssize_t bpe_match(const unsigned char *s, Py_ssize_t n, Py_ssize_t p)
{
    unsigned char c = s[p];
    Py_ssize_t q, r, k;
    if (c == '\'' && p + 1 < n) {
        unsigned char d = s[p + 1] | 32;
        if (bpe_letter(s[p + 1]) && (d == 's' || d == 'd' || d == 'm' || d == 't'))
            return 2;
        if (p + 2 < n && bpe_letter(s[p + 1]) && bpe_letter(s[p + 2])) {
            unsigned char e = s[p + 2] | 32;
            if ((d == 'l' && e == 'l') || (d == 'v' && e == 'e') || (d == 'r' && e == 'e'))
                return 3;
        }
    }
    q = (c == '\r' || c == '\n' || bpe_letter(c) || bpe_digit(c)) ? p : p + 1;
    if (q < n && bpe_letter(s[q])) {
        while (q < n && bpe_letter(s[q]))
            q++;
        return q - p;
    }
    if (bpe_digit(c)) {
        for (q = p; q < n && q - p < 3 && bpe_digit(s[q]); q++)
            ;
        return q - p;
    }
    q = (c == ' ' && p + 1 < n && bpe_other(s[p + 1])) ? p + 1 : p;
    if (bpe_other(s[q])) {
        while (q < n && bpe_other(s[q]))
            q++;
        while (q < n && (s[q] == '\r' || s[q] == '\n'))
            q++;
        return q - p;
    }
    /* c is whitespace */
    for (r = p; r < n && bpe_space(s[r]); r++)
        ;
    if (r == n)
        return n - p;
    for (k = r - 1; k >= p; k--)
        if (s[k] == '\r' || s[k] == '\n')
            return k + 1 - p;
    if (r - p >= 2)
        return r - 1 - p;
    return 1;
}

/* Tokens of the ASCII bytes s[0:n], counted as a whole text; -2 for a piece over BPE_MAX_PIECE. */
static Py_ssize_t bpe_ascii(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t p = 0, total = 0;
    while (p < n) {
        Py_ssize_t m = bpe_match(s, n, p);
        if (m > BPE_MAX_PIECE)
            return -2;
        total += bpe_piece(s + p, m);
        p += m;
    }
    return total;
}

/* Unicode's White_Space (the pattern's \s). */
static int bpe_white(Py_UCS4 c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* len(encode(text)) (tiktoken's ids); -1 with an exception. */
static Py_ssize_t encoded_length(PyObject *encode, PyObject *text)
{
    PyObject *ids = PyObject_CallOneArg(encode, text);
    Py_ssize_t n;
    if (ids == NULL)
        return -1;
    n = PyObject_Length(ids);
    Py_DECREF(ids);
    return n;
}

/* len(encode(text[start:end])); -1 with an exception. */
static Py_ssize_t bpe_encoded(PyObject *text, Py_ssize_t start, Py_ssize_t end, PyObject *encode)
{
    PyObject *part = PyUnicode_Substring(text, start, end);
    Py_ssize_t n;
    if (part == NULL)
        return -1;
    n = encoded_length(encode, part);
    Py_DECREF(part);
    return n;
}

/* cl100k tokens of `text` (`len(encoding.encode_ordinary(text))`); -1 with an exception; -2
 * when it is left to tiktoken (no ranks loaded; not ASCII and no `encode`; all ASCII with a
 * piece over BPE_MAX_PIECE bytes). A text that is not all ASCII is cut after each line end (\r
 * or \n) that a character other than White_Space follows: the pattern ends a piece there (the
 * whitespace run up to that line end is one piece, `\s*[\r\n]`, or ends a `[\r\n]*+`; no piece
 * starts with a line end and goes on), and `find_iter` from a piece boundary finds the pieces
 * it finds in the substring from there (the pattern has no look-behind, and `\s++$` at a
 * substring's end covers the run `\s*[\r\n]` covers). Each ASCII line is counted here; each run
 * of lines holding another character (or an over-long piece) by `encode` (tiktoken's
 * `encode_ordinary`), one call per run. */
static Py_ssize_t bpe_count(PyObject *text, PyObject *encode)
{
    int kind;
    const void *data;
    unsigned char *copy = NULL;
    Py_ssize_t n, i, start = 0, pending = -1, total = 0, m;
    int ascii = 1;
    if (bpe.mask == 0)
        return -2;
    n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text))
        return bpe_ascii((const unsigned char *)PyUnicode_DATA(text), n);
    if (encode == NULL)
        return -2;
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 127)
            ascii = 0;
        if (i + 1 < n && !((c == '\n' || c == '\r') && !bpe_white(PyUnicode_READ(kind, data, i + 1))))
            continue;
        /* a line: text[start:i + 1] */
        m = -2;
        if (ascii) {
            const unsigned char *line;
            if (kind == PyUnicode_1BYTE_KIND) {
                line = (const unsigned char *)data + start;
            } else {
                Py_ssize_t k;
                if (copy == NULL && (copy = PyMem_Malloc((size_t)n)) == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                for (k = start; k <= i; k++)
                    copy[k - start] = (unsigned char)PyUnicode_READ(kind, data, k);
                line = copy;
            }
            m = bpe_ascii(line, i + 1 - start);
        }
        if (m >= 0) {
            if (pending >= 0) {
                Py_ssize_t run = bpe_encoded(text, pending, start, encode);
                if (run < 0)
                    goto fail;
                total += run;
                pending = -1;
            }
            total += m;
        } else if (pending < 0) {
            pending = start;
        }
        start = i + 1;
        ascii = 1;
    }
    if (pending >= 0) {
        Py_ssize_t run = bpe_encoded(text, pending, n, encode);
        if (run < 0)
            goto fail;
        total += run;
    }
    PyMem_Free(copy);
    return total;
fail:
    PyMem_Free(copy);
    return -1;
}

static PyObject *py_bpe_count(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n;
    if (nargs < 1 || nargs > 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "bpe_count(text, encode=None): a str");
        return NULL;
    }
    n = bpe_count(args[0], nargs == 2 && args[1] != Py_None ? args[1] : NULL);
    if (n == -1)
        return NULL;
    if (n == -2)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(n);
}

/* Tokens of one chunk: `bpe_count`, else `len(encode(chunk))`; -1 with an exception. */
static Py_ssize_t chunk_count(PyObject *chunk, PyObject *encode)
{
    Py_ssize_t n = bpe_count(chunk, encode);
    return n != -2 ? n : encoded_length(encode, chunk);
}

/* `Cl100kCounter.text`'s count of a text longer than CL100K_CHUNK_CHARS (its memo aside): the sum
 * of the chunks' counts, each chunk ending at the last newline or space in its second half (the
 * later of the two), else at CL100K_CHUNK_CHARS characters. -1 with an exception. */
static Py_ssize_t chunked_count(Preparer *self, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), start = 0, total = 0;
    while (start < n) {
        Py_ssize_t end = start + CL100K_CHUNK_CHARS < n ? start + CL100K_CHUNK_CHARS : n, tokens;
        PyObject *chunk;
        if (end < n) {
            Py_ssize_t from = start + CL100K_CHUNK_CHARS / 2;
            Py_ssize_t line = PyUnicode_FindChar(s, '\n', from, end, -1), space, cut;
            if (line == -2)
                return -1;
            space = PyUnicode_FindChar(s, ' ', from, end, -1);
            if (space == -2)
                return -1;
            cut = line > space ? line : space;
            if (cut > start)
                end = cut;
        }
        chunk = PyUnicode_Substring(s, start, end);
        if (chunk == NULL)
            return -1;
        tokens = chunk_count(chunk, self->encode);
        Py_DECREF(chunk);
        if (tokens < 0)
            return -1;
        total += tokens;
        start = end;
    }
    return total;
}

/* `Cl100kCounter.text(s)`: the memo (`_known`, by the text or by the BLAKE2b digest of its
 * UTF-8 above `digest_above` characters), else one count (`encodes` + 1, the count kept):
 * `bpe_count`, or tiktoken where it does not count; a text longer than `CL100K_CHUNK_CHARS`
 * in chunks (`chunked_count`), as the Python method counts it. */
static int cl100k_text(Preparer *self, PyObject *s, long long *tokens)
{
    PyObject *key, *known, *total;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int r, tried = 0;
    if (n == 0) {
        *tokens = 0;
        return 0;
    }
    if (self->digest_above >= 0 && n > self->digest_above) {
        Py_ssize_t size;
        uint8_t digest[16];
        const char *utf8 = PyUnicode_AsUTF8AndSize(s, &size);
        if (utf8 == NULL) {  /* lone surrogates ("surrogatepass"): the Python method */
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return -1;
            PyErr_Clear();
            return python_text(self, s, tokens);
        }
        blake2b_16((const uint8_t *)utf8, (size_t)size, digest);
        key = PyBytes_FromStringAndSize((const char *)digest, 16);
        if (key == NULL)
            return -1;
    } else {
        key = Py_NewRef(s);
    }
    known = PyDict_GetItemWithError(self->known, key);
    if (known != NULL) {
        Py_DECREF(key);
        return count_of(known, tokens);
    }
    if (PyErr_Occurred())
        goto fail;
    self->pending_encodes++;  /* self.encodes += 1 (`flush_pending`) */
    self->encoded = 1;
    if (bpe.mask != 0 && n <= CL100K_CHUNK_CHARS && PyUnicode_IS_ASCII(s)) {
        n = bpe_count(s, NULL);  /* (without tiktoken's encoding: it may never be built) */
        if (n >= 0)
            goto counted;
        tried = 1;  /* (an over-long piece: tiktoken counts it, no second scan) */
    }
    if (self->encode == NULL) {  /* (the first text this preparer gives tiktoken, or the first text) */
        PyObject *encoding = PyObject_GetAttr(self->counter, s_encoding), *used;
        if (encoding == NULL)
            goto fail;
        self->encode = PyObject_GetAttr(encoding, s_encode_ordinary);
        used = self->encode != NULL ? py_use_cl100k(NULL, encoding) : NULL;
        Py_DECREF(encoding);
        if (used == NULL)
            goto fail;
        Py_DECREF(used);
    }
    n = PyUnicode_GET_LENGTH(s) > CL100K_CHUNK_CHARS ? chunked_count(self, s) : tried ? -2 : bpe_count(s, self->encode);
    if (n >= 0)
        goto counted;
    if (n == -1)
        goto fail;
    n = encoded_length(self->encode, s);
    if (n < 0)
        goto fail;
counted:
    total = PyLong_FromSsize_t(n);
    if (total == NULL)
        goto fail;
    r = PyDict_SetItem(self->known, key, total);
    Py_DECREF(total);
    Py_DECREF(key);
    *tokens = n;
    return r;
fail:
    Py_DECREF(key);
    return -1;
}

/* A named tuple made as `tuple.__new__(kind, items)` makes it (its Python `__new__` is not run). */
static PyObject *named_tuple(PyObject *kind, PyObject **items, Py_ssize_t n)
{
    PyTypeObject *type = (PyTypeObject *)kind;
    PyObject *result = type->tp_alloc(type, n);
    Py_ssize_t i;
    if (result == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        PyTuple_SET_ITEM(result, i, Py_NewRef(items[i]));
    return result;
}

/* `TokenLedger.count_split(message, parts)` for this preparer's counter: each part counted with
 * `counter.text`, the overhead (`Cl100kCounter.overhead`: 4; `CharsV1Counter.overhead`:
 * `max(message_tokens(message) - parts, 0)`) added to the first part (or an ("other", None, …)
 * part), `ledger.counted` + 1 when the counter did real work. New reference or NULL. */
static PyObject *count_split(Preparer *self, PyObject *message, PyObject *role, Parts *parts)
{
    PyObject *tuple_parts = NULL, *result = NULL, *items[3];
    long long parts_total = 0, overhead;
    Py_ssize_t i, n = parts->n;
    self->encoded = 0;
    for (i = 0; i < n; i++) {
        Part *part = &parts->items[i];
        if (self->kind == COUNTER_CL100K) {
            if (cl100k_text(self, part->payload, &part->tokens) < 0)
                goto done;
        } else {
            part->tokens = chars_text_tokens(part->payload);
        }
        parts_total += part->tokens;
    }
    if (self->kind == COUNTER_CL100K) {
        overhead = CL100K_MESSAGE_OVERHEAD;
    } else {
        overhead = chars_message_tokens(message, role, parts) - parts_total;
        if (overhead < 0)
            overhead = 0;
    }
    tuple_parts = PyTuple_New(n ? n : (overhead ? 1 : 0));
    if (tuple_parts == NULL)
        goto done;
    for (i = 0; i < n; i++) {
        PyObject *part;
        long long tokens = parts->items[i].tokens + (i == 0 ? overhead : 0);
        items[0] = parts->items[i].category;
        items[1] = parts->items[i].child;
        items[2] = PyLong_FromLongLong(tokens);
        if (items[2] == NULL)
            goto done;
        part = named_tuple(self->part_count, items, 3);
        Py_DECREF(items[2]);
        if (part == NULL)
            goto done;
        PyTuple_SET_ITEM(tuple_parts, i, part);
    }
    if (n == 0 && overhead) {
        PyObject *part;
        items[0] = s_other;
        items[1] = Py_None;
        items[2] = PyLong_FromLongLong(overhead);
        if (items[2] == NULL)
            goto done;
        part = named_tuple(self->part_count, items, 3);
        Py_DECREF(items[2]);
        if (part == NULL)
            goto done;
        PyTuple_SET_ITEM(tuple_parts, 0, part);
    }
    items[0] = PyLong_FromLongLong(parts_total + overhead);
    if (items[0] == NULL)
        goto done;
    items[1] = tuple_parts;
    result = named_tuple(self->message_count, items, 2);
    Py_DECREF(items[0]);
    if (result == NULL)
        goto done;
    /* self.counted += 1 (`flush_pending`) when the counter did real work: always for chars-v1
     * (no `encodes`), for cl100k when `counter.encodes` changed */
    if (self->kind != COUNTER_CL100K || self->encoded)
        self->pending_counted++;
done:
    Py_XDECREF(tuple_parts);
    return result;
}

/* Append the whitespace-separated words of `text` to `out` (at most PREVIEW_KEPT characters,
 * one space between words; `started`: a word was written before). Part of `user_stand_in`. */
static void preview_words(PyObject *text, Py_UCS4 *out, Py_ssize_t *len, int *started)
{
    Py_ssize_t i, n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text), in_word = 0;
    const void *data = PyUnicode_DATA(text);
    for (i = 0; i < n && *len < PREVIEW_KEPT; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(ch)) {
            in_word = 0;
            continue;
        }
        if (!in_word) {
            if (*started) {
                out[(*len)++] = ' ';
                if (*len >= PREVIEW_KEPT)
                    break;
            }
            in_word = *started = 1;
        }
        out[(*len)++] = ch;
    }
}

/* `slim._user_stand_in(content)`: `" ".join(prompt_text(content).split())[:PREVIEW_KEPT]`,
 * with `prompt_text`: the string, or the `text` of the `"type": "text"` blocks joined by
 * spaces, or "[image]" for a non-empty list whose joined text is empty. New reference. */
static PyObject *user_stand_in(PyObject *content)
{
    Py_UCS4 out[PREVIEW_KEPT];
    Py_ssize_t len = 0;
    int started = 0;
    if (PyUnicode_CheckExact(content)) {
        preview_words(content, out, &len, &started);
    } else {
        Py_ssize_t i, n = PyList_GET_SIZE(content), texts = 0, joined = 0;
        for (i = 0; i < n; i++) {
            PyObject *block = PyList_GET_ITEM(content, i), *text;
            int error = 0;
            if (!block_type_is(block, key_str[K_TEXT], &error)) {
                if (error)
                    return NULL;
                continue;
            }
            text = get(block, K_TEXT);  /* `b.get("text", "")`: a str when present */
            if (text == NULL && PyErr_Occurred())
                return NULL;
            texts++;
            if (text != NULL) {
                joined += PyUnicode_GET_LENGTH(text);
                preview_words(text, out, &len, &started);
            }
        }
        if (texts)
            joined += texts - 1;  /* the separators */
        if (joined == 0 && n > 0)
            return Py_NewRef(s_image_preview);
    }
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, len);
}

/* The `content` of an assistant stand-in: one `{"type": "toolCall", "id": b.get("id")}` per
 * tool-call block, else `()` (`stand_in`). New reference. */
static PyObject *assistant_stand_in(PyObject *content)
{
    PyObject *calls = NULL;
    Py_ssize_t i, n;
    if (!PyList_CheckExact(content))
        return PyTuple_New(0);
    n = PyList_GET_SIZE(content);
    for (i = 0; i < n; i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *call, *id;
        int error = 0;
        if (!block_type_is(block, s_toolCall, &error)) {
            if (error)
                goto fail;
            continue;
        }
        id = get(block, K_ID);
        if (id == NULL && PyErr_Occurred())
            goto fail;
        if (calls == NULL && (calls = PyList_New(0)) == NULL)
            goto fail;
        call = PyDict_New();
        if (call == NULL || PyDict_SetItem(call, key_str[K_TYPE], s_toolCall) < 0 ||
            PyDict_SetItem(call, key_str[K_ID], id ? id : Py_None) < 0 || PyList_Append(calls, call) < 0) {
            Py_XDECREF(call);
            goto fail;
        }
        Py_DECREF(call);
    }
    return calls ? calls : PyTuple_New(0);
fail:
    Py_XDECREF(calls);
    return NULL;
}

/* `slim.stand_in(message, shared)` for a message whose content is not null: a `StandIn` copy
 * without `details` and `isError`, shared strings for `_SHARED_VALUES`, its content replaced
 * by the role's stand-in. New reference. */
static PyObject *stand_in(Preparer *self, PyObject *message, PyObject *role)
{
    PyObject *slim = PyObject_CallOneArg(self->standin, message), *content, *value, *key, *one_value;
    Py_ssize_t pos = 0;
    if (slim == NULL)
        return NULL;
    if ((PyDict_Contains(slim, s_details) == 1 && PyDict_DelItem(slim, s_details) < 0) ||
        (PyDict_Contains(slim, s_isError) == 1 && PyDict_DelItem(slim, s_isError) < 0))
        goto fail;
    while (PyDict_Next(slim, &pos, &key, &one_value)) {  /* `_SHARED_VALUES.intersection(slim)`, in its order */
        int code = key_code(key);
        if (code < 0)
            goto fail;
        if ((code == K_ROLE || code == K_PROVIDER || code == K_MODEL || code == K_API || code == K_STOPREASON ||
             code == K_TOOLNAME) && PyUnicode_CheckExact(one_value)) {
            PyObject *kept = PyDict_SetDefault(self->shared, one_value, one_value);
            if (kept == NULL || (kept != one_value && PyDict_SetItem(slim, key, kept) < 0))
                goto fail;  /* (a value replaced: the dict keeps its size and order) */
        }
    }
    content = get(slim, K_CONTENT);
    if (content == NULL) {
        if (PyErr_Occurred())
            goto fail;
        return slim;
    }
    if (str_is(role, s_user))
        value = user_stand_in(content);
    else if (str_is(role, s_assistant))
        value = assistant_stand_in(content);
    else
        value = Py_NewRef(s_empty);
    if (value == NULL || PyDict_SetItem(slim, key_str[K_CONTENT], value) < 0) {
        Py_XDECREF(value);
        goto fail;
    }
    Py_DECREF(value);
    return slim;
fail:
    Py_DECREF(slim);
    return NULL;
}

#define HAND_BACK(self) ((self)->handed_back++, Py_NewRef(Py_False))
#define REJECT(self) ((self)->rejected++, Py_NewRef(Py_None))

/* The checks `SlimReader._prepare` and `PiSessionReader`'s short route share: `raw` is plainly
 * a well-formed `message` entry (plain bytes under the cap, not the first line, at most
 * `max_depth` brackets, no `\uD8..` escape, orjson parses it, an object with only the keys
 * type/id/parentId/timestamp/message, type "message", a message that conforms). Returns
 * PLAIN (`*obj_out`: the parsed entry, a new reference), NOT_PLAIN (the general route reads
 * it), NOT_PORTED (no `message` key, a non-int offset: what the Python route does) or -1 (an
 * error is set). Changes nothing. */
enum { NOT_PLAIN = 0, PLAIN = 1, NOT_PORTED = 2 };

static int plain_entry(Preparer *self, PyObject *offset, PyObject *raw, PyObject **obj_out)
{
    PyObject *obj, *message, *key, *value;
    const char *data;
    Py_ssize_t size, i, brackets = 0, pos = 0;
    int r;

    *obj_out = NULL;
    if (!PyBytes_CheckExact(raw))
        return NOT_PLAIN;
    if (!PyLong_CheckExact(offset))
        return NOT_PORTED;
    r = PyObject_Not(offset);  /* offset == 0: the first line (a BOM) */
    if (r != 0)
        return r < 0 ? -1 : NOT_PLAIN;
    data = PyBytes_AS_STRING(raw);
    size = PyBytes_GET_SIZE(raw);
    if (size > self->max_line_bytes)
        return NOT_PLAIN;
    for (i = 0; i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'); i++)
        ;
    if (i == size || data[i] != '{')  /* not a JSON object (no parse, so no decode error made) */
        return NOT_PLAIN;
    for (i = 0; i < size; i++)
        brackets += data[i] == '[' || data[i] == '{';
    if (brackets > self->max_depth || has_surrogate_escape(data, size))
        return NOT_PLAIN;

    obj = PyObject_CallOneArg(self->loads, raw);
    if (obj == NULL) {
        if (!PyErr_ExceptionMatches(self->decode_error))
            return -1;
        PyErr_Clear();
        return NOT_PLAIN;
    }
    r = NOT_PLAIN;
    if (!PyDict_CheckExact(obj) || !str_is(get(obj, K_TYPE), s_message)) {
        r = PyErr_Occurred() ? -1 : NOT_PLAIN;
        goto done;
    }
    while (PyDict_Next(obj, &pos, &key, &value)) {  /* `obj.keys() <= _PLAIN_MESSAGE_KEYS` */
        int code = key_code(key);
        if (code < 0) {
            r = -1;
            goto done;
        }
        if (code != K_TYPE && code != K_ID && code != K_PARENTID && code != K_TIMESTAMP && code != K_MESSAGE)
            goto done;
    }
    message = get(obj, K_MESSAGE);
    if (message == NULL) {
        r = PyErr_Occurred() ? -1 : NOT_PORTED;  /* no `message` key: whatever the Python route does */
        goto done;
    }
    if (!PyDict_CheckExact(message))
        goto done;
    r = message_conforms(message);
    if (r <= 0) {
        r = r < 0 ? -1 : NOT_PLAIN;
        goto done;
    }
    *obj_out = obj;
    return PLAIN;
done:
    Py_DECREF(obj);
    return r;
}

/* True (with RuntimeError set) when `Preparer.__init__` did not run. */
static int not_initialized(Preparer *self)
{
    if (self->loads != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "Preparer.__init__ was not called");
    return 1;
}

/* `SlimReader._prepare(offset, raw)`: see the module comment. */
static PyObject *prepare_line(Preparer *self, PyObject *offset, PyObject *raw)
{
    PyObject *obj = NULL, *message, *role, *value, *slim = NULL, *result = NULL;
    Py_ssize_t size;
    Parts parts = {NULL, 0, 0};
    int in_context, r;

    r = plain_entry(self, offset, raw, &obj);
    if (r != PLAIN)
        return r < 0 ? NULL : r == NOT_PORTED ? HAND_BACK(self) : REJECT(self);
    size = PyBytes_GET_SIZE(raw);
    message = get(obj, K_MESSAGE);  /* (a dict: `plain_entry` checked it) */
    value = get(message, K_CONTENT);  /* stand_in: a null content is kept whole */
    if (value == Py_None) {
        result = REJECT(self);
        goto done;
    }
    if (value == NULL && PyErr_Occurred())
        goto done;
    role = get(message, K_ROLE);
    if (role == NULL && PyErr_Occurred())
        goto done;
    in_context = in_llm_context(message, role);
    if (in_context < 0)
        goto done;
    if (in_context && size + 1 <= self->defer_bytes) {  /* counted now: its parts first */
        r = message_parts(self, message, role, &parts);
        if (r <= 0) {
            if (r == 0)
                result = HAND_BACK(self);
            goto done;
        }
    }
    /* From here on: no hand-back (the shared dict, the memo and the ledger change). */
    slim = stand_in(self, message, role);
    if (slim == NULL)
        goto done;
    if (in_context) {
        PyObject *counted;
        if (size + 1 > self->defer_bytes) {
            counted = Py_BuildValue("(OOn)", Py_None, offset, size + 1);
        } else {
            PyObject *count = count_split(self, message, role, &parts), *kept;
            if (count == NULL)
                goto done;
            counted = PyTuple_Pack(2, self->counter_name, count);
            Py_DECREF(count);
            if (counted != NULL) {
                kept = PyDict_SetDefault(self->shared, counted, counted);
                Py_XINCREF(kept);
                Py_DECREF(counted);
                counted = kept;
            }
        }
        if (counted == NULL)
            goto done;
        r = PyObject_SetAttr(slim, s_counted, counted);
        Py_DECREF(counted);
        if (r < 0)
            goto done;
    }
    {
        PyObject *id = get(obj, K_ID), *parent;
        if (id == NULL && PyErr_Occurred())
            goto done;
        parent = get(obj, K_PARENTID);
        if (parent == NULL && PyErr_Occurred())
            goto done;
        result = PyTuple_Pack(3, id ? id : Py_None, parent ? parent : Py_None, slim);
        if (result != NULL)
            self->taken++;
    }
done:
    parts_clear(&parts);
    Py_XDECREF(slim);
    Py_XDECREF(obj);
    return result;
}

static PyObject *Preparer_call(Preparer *self, PyObject *args, PyObject *kwargs)
{
    PyObject *offset, *raw, *result;
    if (!PyArg_ParseTuple(args, "OO:Preparer", &offset, &raw))
        return NULL;
    if (not_initialized(self))
        return NULL;
    result = prepare_line(self, offset, raw);
    if (flush_pending((PyObject *)self) < 0)
        Py_CLEAR(result);
    return result;
}

/* `preparer.parse(offset, raw)`: the parsed entry when `raw` is plainly a well-formed message
 * entry (`plain_entry`), else False (the general route reads the line). Changes nothing: the
 * full reader's short route (`PiSessionReader.feed`), which then adds the entry as it is. */
static PyObject *Preparer_parse(Preparer *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj;
    int r;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "parse(offset, raw) takes 2 arguments");
        return NULL;
    }
    if (not_initialized(self))
        return NULL;
    r = plain_entry(self, args[0], args[1], &obj);
    if (r < 0)
        return NULL;
    return r == PLAIN ? obj : Py_NewRef(Py_False);
}

/* `preparer.count(message)`: `ledger.count_split(message, message_parts(message))` for a
 * message dict that conforms, has a content that is not null and is in the LLM context, with the same effects on the ledger
 * and its counter; False (nothing changed) for any other message or one whose parts are not
 * ported (the Python route counts it). */
static PyObject *Preparer_count(Preparer *self, PyObject *message)
{
    PyObject *role, *content, *result;
    Parts parts = {NULL, 0, 0};
    int r;
    if (not_initialized(self))
        return NULL;
    if (!PyDict_CheckExact(message))
        return Py_NewRef(Py_False);
    r = message_conforms(message);
    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_False);
    content = get(message, K_CONTENT);  /* a null content: not what `Preparer_call` counts */
    if (content == Py_None)
        return Py_NewRef(Py_False);
    if (content == NULL && PyErr_Occurred())
        return NULL;
    role = get(message, K_ROLE);
    if (role == NULL && PyErr_Occurred())
        return NULL;
    r = in_llm_context(message, role);
    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_False);
    r = message_parts(self, message, role, &parts);
    if (r <= 0) {
        parts_clear(&parts);
        return r < 0 ? NULL : Py_NewRef(Py_False);
    }
    result = count_split(self, message, role, &parts);
    parts_clear(&parts);
    if (flush_pending((PyObject *)self) < 0)
        Py_CLEAR(result);
    return result;
}

/* ------------------------------------------------------------------ blocks of lines */
/* `SlimReader`'s bulk read (`slim._feed_blocks`, `_prepare_into`, `_add_records`) in C: a
 * block of file bytes split into lines here, each line prepared by `prepare_line` and added
 * to the reader as `SlimReader._fast_line` / `_add_prepared` add it, without a Python frame
 * per line. Every line these functions do not finish (not taken by `prepare_line`, over the
 * size cap, or an entry `_add_prepared` would report: no string id, a duplicate id, a parent
 * not read yet, or missing parents pending) is handed back to the Python caller, which reads
 * it the way `SlimReader.feed` does, with the answer already made (`prepare_line` runs once
 * per line). */

/* What a block adds to: the reader's lists and `entries.Entry`'s slot layout. Borrowed refs. */
typedef struct {
    PyObject *reader;
    PyTypeObject *type;          /* entries.Entry */
    Py_ssize_t offsets[E_COUNT]; /* byte offsets of its slots */
    PyObject *entries;           /* reader.entries (a list) */
    PyObject *by_id;             /* reader.by_id (a dict) */
    PyObject *missing;           /* reader.diagnostics.missing_parents (a dict) */
    PyObject *leaf;              /* the id of the last entry added, or NULL */
    int added;                   /* entries added (`take_entry`) */
    int skipped;                 /* runs of blank lines read (`skip_lines`) */
} Block;

static void block_close(Block *b)
{
    Py_CLEAR(b->entries);
    Py_CLEAR(b->by_id);
    Py_CLEAR(b->missing);
}

/* The byte offsets of `type`'s fields `names` (plain object slots: a dataclass with
 * `slots=True`), into `offsets`; -1 with TypeError for anything else. Objects of `type` are
 * then made by `tp_alloc` with each slot set directly (what its `__init__` sets, without it). */
static int slot_layout(PyObject *type, const char **names, int n, Py_ssize_t *offsets)
{
    int i;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "a type with slots expected");
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString(type, names[i]);
        PyMemberDef *member;
        if (descr == NULL)
            return -1;
        if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_TypeError, "%s.%s: not a slot", ((PyTypeObject *)type)->tp_name, names[i]);
            return -1;
        }
        member = ((PyMemberDescrObject *)descr)->d_member;
        offsets[i] = member->offset;
        Py_DECREF(descr);
        if (member->type != T_OBJECT_EX || member->offset <= 0 ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > ((PyTypeObject *)type)->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "%s.%s: not an object slot", ((PyTypeObject *)type)->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

/* Fill `b` for `reader` and `entry_type` (a type whose fields are plain object slots: a
 * dataclass with `slots=True`); -1 with TypeError for anything else. The slot layout of the
 * last entry type is kept in the preparer: a call that reads one line (a file of blank lines
 * or scalars hands back every line) costs little more than the line. */
static int block_open(Block *b, Preparer *self, PyObject *reader, PyObject *entry_type)
{
    PyObject *diagnostics;
    memset(b, 0, sizeof *b);
    b->reader = reader;
    if (entry_type != self->entry_type) {
        if (slot_layout(entry_type, entry_fields, E_COUNT, self->entry_offsets) < 0) {
            Py_CLEAR(self->entry_type);
            return -1;
        }
        Py_XSETREF(self->entry_type, Py_NewRef(entry_type));
    }
    memcpy(b->offsets, self->entry_offsets, sizeof b->offsets);
    b->type = (PyTypeObject *)entry_type;
    b->entries = PyObject_GetAttr(reader, s_entries);
    b->by_id = PyObject_GetAttr(reader, s_by_id);
    diagnostics = PyObject_GetAttr(reader, s_diagnostics);
    if (b->entries == NULL || b->by_id == NULL || diagnostics == NULL) {
        Py_XDECREF(diagnostics);
        goto fail;
    }
    b->missing = PyObject_GetAttr(diagnostics, s_missing_parents);
    Py_DECREF(diagnostics);
    if (b->missing == NULL)
        goto fail;
    if (!PyList_CheckExact(b->entries) || !PyDict_CheckExact(b->by_id) || !PyDict_CheckExact(b->missing)) {
        PyErr_SetString(PyExc_TypeError, "reader.entries, by_id, diagnostics.missing_parents: a list and dicts");
        goto fail;
    }
    return 0;
fail:
    block_close(b);
    return -1;
}

/* reader.leaf_id = the last id added (when one was), last_line_no, end_offset. */
static int block_finish(Block *b, Py_ssize_t line_no, Py_ssize_t end_offset, int lines)
{
    PyObject *value;
    int r;
    if (!lines)
        return 0;
    if (b->leaf != NULL && PyObject_SetAttr(b->reader, s_leaf_id, b->leaf) < 0)
        return -1;
    value = PyLong_FromSsize_t(line_no);
    if (value == NULL)
        return -1;
    r = PyObject_SetAttr(b->reader, s_last_line_no, value);
    Py_DECREF(value);
    if (r < 0)
        return -1;
    value = PyLong_FromSsize_t(end_offset);
    if (value == NULL)
        return -1;
    r = PyObject_SetAttr(b->reader, s_end_offset, value);
    Py_DECREF(value);
    return r;
}

/* `block_finish` after an error, the error kept: the reader's state matches the entries
 * added before it (its exception then ends the read). */
static void block_finish_on_error(Block *b, Py_ssize_t line_no, Py_ssize_t end_offset, int lines)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (block_finish(b, line_no, end_offset, lines) < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, traceback);
}

/* The entry of `values` (all fields but the line number and length, given as numbers) made
 * without its `__init__`, appended to the reader's entries and indexed by its id: the reader's
 * leaf. 1, or -1 with an exception. */
static int block_insert(Block *b, PyObject **values, Py_ssize_t line_no, Py_ssize_t length)
{
    PyObject *entry = b->type->tp_alloc(b->type, 0), *id = values[E_ID];
    int i, r;
    if (entry == NULL)
        return -1;
    for (i = 0; i < E_COUNT; i++)
        if (i != E_LINE_NO && i != E_LENGTH)
            *(PyObject **)((char *)entry + b->offsets[i]) = Py_NewRef(values[i]);
    *(PyObject **)((char *)entry + b->offsets[E_LINE_NO]) = PyLong_FromSsize_t(line_no);
    *(PyObject **)((char *)entry + b->offsets[E_LENGTH]) = PyLong_FromSsize_t(length);
    if (*(PyObject **)((char *)entry + b->offsets[E_LINE_NO]) == NULL ||
        *(PyObject **)((char *)entry + b->offsets[E_LENGTH]) == NULL) {
        Py_DECREF(entry);
        return -1;
    }
    r = PyList_Append(b->entries, entry);
    if (r == 0)
        r = PyDict_SetItem(b->by_id, id, entry);
    Py_DECREF(entry);
    if (r < 0)
        return -1;
    b->leaf = id;
    return 1;
}

/* `SlimReader._add_prepared(entry_id, parent, slim, line_no, offset, length)` for the common
 * entry: a string id not read before, a parent that is None, not a string, "" or an id read
 * before (whose entry's own id string is kept), no missing parents pending. 1: added; 0: not
 * this case (nothing changed: the caller runs `_add_prepared`); -1: an error. `offset` is the
 * line's offset as an int object (borrowed). */
static int block_add(Block *b, PyObject *id, PyObject *parent, PyObject *slim, Py_ssize_t line_no, PyObject *offset,
                     Py_ssize_t length)
{
    PyObject *earlier, *parent_id = Py_None, *values[E_COUNT];
    if (!PyUnicode_CheckExact(id) || PyDict_GET_SIZE(b->missing) != 0)
        return 0;
    earlier = PyDict_GetItemWithError(b->by_id, id);
    if (earlier != NULL)
        return 0;
    if (PyErr_Occurred())
        return -1;
    if (PyUnicode_CheckExact(parent) && PyUnicode_GET_LENGTH(parent) > 0) {
        earlier = PyDict_GetItemWithError(b->by_id, parent);
        if (earlier == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (Py_TYPE(earlier) != b->type)
            return 0;
        parent_id = *(PyObject **)((char *)earlier + b->offsets[E_ID]);
        if (parent_id == NULL)
            return 0;
    }
    values[E_TYPE] = s_message;
    values[E_ID] = id;
    values[E_PARENT_ID] = parent_id;
    values[E_TIMESTAMP] = s_empty;
    values[E_RAW] = slim;
    values[E_OFFSET] = offset;
    return block_insert(b, values, line_no, length);
}

/* (pos, line_no, code, answer): code 0 = no complete line at `pos`; 1 = the line at `pos`
 * (its number line_no + 1) is the caller's, `answer` what `prepare_line` said for it (False,
 * None, or a tuple `block_add` did not add), or None for a line over the size cap. */
static PyObject *block_result(Py_ssize_t pos, Py_ssize_t line_no, int code, PyObject *answer)
{
    return Py_BuildValue("(nniO)", pos, line_no, code, answer ? answer : Py_None);
}

/* Parse the (reader or list, entry_type or base, data, pos, base, number) arguments shared by
 * `feed_block` and `prepare_block`. */
static int block_args(PyObject *const *args, Py_ssize_t nargs, const char *name, const char **data, Py_ssize_t *size,
                      Py_ssize_t *pos, Py_ssize_t *base, Py_ssize_t *number)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "%s takes 6 arguments", name);
        return -1;
    }
    if (!PyBytes_CheckExact(args[2])) {
        PyErr_Format(PyExc_TypeError, "%s: data must be bytes", name);
        return -1;
    }
    *data = PyBytes_AS_STRING(args[2]);
    *size = PyBytes_GET_SIZE(args[2]);
    *pos = PyLong_AsSsize_t(args[3]);
    *base = PyLong_AsSsize_t(args[4]);
    *number = PyLong_AsSsize_t(args[5]);
    if ((*pos == -1 || *base == -1 || *number == -1) && PyErr_Occurred())
        return -1;
    if (*pos < 0 || *pos > *size || *base < 0 || *number < 0) {
        PyErr_Format(PyExc_ValueError, "%s: pos, base or line number out of range", name);
        return -1;
    }
    return 0;
}

/* Whether data[0:size] is only ASCII whitespace as `str.strip` sees it (space, \t \n \v \f
 * \r, \x1c-\x1f): a line `PiSessionReader._read_line` skips after its size and depth checks,
 * with no diagnostic (a blank line; whitespace outside ASCII is left to it). */
static int blank_line(const char *data, Py_ssize_t size)
{
    Py_ssize_t i;
    for (i = 0; i < size; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c != ' ' && (c < '\t' || c > '\r') && (c < 0x1c || c > 0x1f))
            return 0;
    }
    return 1;
}

/* The next line of data[pos:] for a block: 1 with *raw, *offset (new refs) and *len set; 0
 * when no complete line is left; 2 for a line over the size cap (nothing made; counted as
 * rejected, as `preparer(offset, raw)` rejects the `OversizedLine` a line reader gives for it);
 * 3 for a blank line (`blank_line`; nothing made, *len set; counted as rejected, as
 * `prepare_line` rejects it); -1 error. */
static int block_line(Preparer *self, const char *data, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t base,
                      PyObject **raw, PyObject **offset, Py_ssize_t *len)
{
    const char *nl = memchr(data + pos, '\n', (size_t)(size - pos));
    if (nl == NULL)
        return 0;
    *len = nl - (data + pos);
    if (*len > self->max_line_bytes) {
        self->rejected++;
        return 2;
    }
    if (blank_line(data + pos, *len)) {
        self->rejected++;
        return 3;
    }
    *raw = PyBytes_FromStringAndSize(data + pos, *len);
    if (*raw == NULL)
        return -1;
    *offset = PyLong_FromSsize_t(base + pos);
    if (*offset == NULL) {
        Py_CLEAR(*raw);
        return -1;
    }
    return 1;
}

/* What a block does with a line `prepare_line` prepared ((id, parentId, stand-in), its line
 * number, its offset as an int object, its length with the newline): 1 taken, 2 taken and the
 * block pauses after it, 0 left to the caller (nothing changed), -1 error. */
typedef int (*TakeLine)(void *ctx, PyObject *prepared, Py_ssize_t number, PyObject *offset, Py_ssize_t length);

/* What a block does with a run of blank lines (`blank_line`: each read as `_read_line` reads it,
 * which only moves the reader past it), given the last one's number, offset and length with
 * the newline: 0, or -1 with an exception. */
typedef int (*SkipLines)(void *ctx, Py_ssize_t number, Py_ssize_t offset, Py_ssize_t length);

/* The complete lines of data[*pos:] (`base`: the file offset of data[0]; *number: the number of
 * the line before data[*pos]), each prepared and given to `take` (runs of blank lines to
 * `skip`), up to the first line left to the caller: then *code = 1 and *answer = what
 * `prepare_line` said for it (a new reference; NULL for a line over the size cap); or after a
 * line `take` paused on: *code = 2. *pos and *number stay at the last line read. 0, or -1
 * with an exception. */
static int block_loop(Preparer *self, const char *data, Py_ssize_t size, Py_ssize_t *pos, Py_ssize_t base,
                      Py_ssize_t *number, TakeLine take, SkipLines skip, void *ctx, int *code, PyObject **answer)
{
    Py_ssize_t blank = -1, blank_len = 0; /* the last blank line not yet given to `skip`: its pos */
    for (;;) {
        PyObject *raw = NULL, *offset = NULL, *prepared;
        Py_ssize_t len;
        int r = block_line(self, data, size, *pos, base, &raw, &offset, &len);
        if (r == 3) {
            blank = *pos;
            blank_len = len + 1;
            (*number)++;
            *pos += len + 1;
            continue;
        }
        if (blank >= 0 && r >= 0 && skip(ctx, *number, base + blank, blank_len) < 0) {
            Py_XDECREF(raw);
            Py_XDECREF(offset);
            return -1;
        }
        blank = -1;
        if (r <= 0)
            return r;
        if (r == 2) {
            *code = 1;
            return 0;
        }
        prepared = prepare_line(self, offset, raw);
        Py_DECREF(raw);
        if (prepared == NULL) {
            Py_DECREF(offset);
            return -1;
        }
        r = PyTuple_CheckExact(prepared) && PyTuple_GET_SIZE(prepared) == 3
                ? take(ctx, prepared, *number + 1, offset, len + 1) : 0;
        Py_DECREF(offset);
        if (r <= 0) {
            if (r < 0) {
                Py_DECREF(prepared);
                return -1;
            }
            *answer = prepared;
            *code = 1;
            return 0;
        }
        Py_DECREF(prepared);
        (*number)++;
        *pos += len + 1;
        if (r == 2) {
            *code = 2;
            return 0;
        }
    }
}

/* `block_loop`'s `take` for `feed_block`: the entry added to the reader (`block_add`). */
static int take_entry(void *ctx, PyObject *prepared, Py_ssize_t number, PyObject *offset, Py_ssize_t length)
{
    Block *b = (Block *)ctx;
    int r = block_add(b, PyTuple_GET_ITEM(prepared, 0), PyTuple_GET_ITEM(prepared, 1), PyTuple_GET_ITEM(prepared, 2),
                      number, offset, length);
    b->added += r > 0;
    return r;
}

/* `block_loop`'s `skip` for `feed_block`: the reader moves past the run (`block_finish`). */
static int skip_lines(void *ctx, Py_ssize_t number, Py_ssize_t offset, Py_ssize_t length)
{
    ((Block *)ctx)->skipped++;
    return 0;
}

/* Where `prepare_block` puts its records: the list, and the length at which it pauses. */
typedef struct {
    PyObject *records;
    Py_ssize_t most;
} Records;

/* `block_loop`'s `take` for `prepare_block`: the record (number, offset, length, id, parentId,
 * stand-in) appended to the records; 2 once they reach `most`. */
static int take_record(void *ctx, PyObject *prepared, Py_ssize_t number, PyObject *offset, Py_ssize_t length)
{
    Records *out = (Records *)ctx;
    PyObject *record = Py_BuildValue("(nOnOOO)", number, offset, length, PyTuple_GET_ITEM(prepared, 0),
                                     PyTuple_GET_ITEM(prepared, 1), PyTuple_GET_ITEM(prepared, 2));
    int r;
    if (record == NULL)
        return -1;
    r = PyList_Append(out->records, record);
    Py_DECREF(record);
    return r < 0 ? -1 : PyList_GET_SIZE(out->records) >= out->most ? 2 : 1;
}

/* `block_loop`'s `skip` for `prepare_block`: the record (number, offset, length) of the run's
 * last line (`_add_records` moves the reader past it). */
static int skip_record(void *ctx, Py_ssize_t number, Py_ssize_t offset, Py_ssize_t length)
{
    PyObject *record = Py_BuildValue("(nnn)", number, offset, length);
    int r;
    if (record == NULL)
        return -1;
    r = PyList_Append(((Records *)ctx)->records, record);
    Py_DECREF(record);
    return r;
}

/* `preparer.feed_block(reader, entry_type, data, pos, base, line_no)`: read the complete
 * lines of data[pos:] (`base`: the file offset of data[0]; `line_no`: the number of the line
 * before data[pos]) into `reader` (a `SlimReader` after its version-3 header, whose `_prepare`
 * is this preparer) as `SlimReader.feed` reads them, up to the first line it leaves to the
 * caller (`block_result`). Sets the reader's `last_line_no`, `end_offset` and `leaf_id`. */
static PyObject *Preparer_feed_block(Preparer *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *data;
    Py_ssize_t size, pos, base, line_no;
    PyObject *answer = NULL, *result = NULL;
    Block b;
    int code = 0;
    if (not_initialized(self) || block_args(args, nargs, "feed_block", &data, &size, &pos, &base, &line_no) < 0)
        return NULL;
    if (block_open(&b, self, args[0], args[1]) < 0)
        return NULL;
    if (block_loop(self, data, size, &pos, base, &line_no, take_entry, skip_lines, &b, &code, &answer) < 0)
        block_finish_on_error(&b, line_no, base + pos, b.added + b.skipped);
    else if (block_finish(&b, line_no, base + pos, b.added + b.skipped) == 0)
        result = block_result(pos, line_no, code, answer);
    Py_XDECREF(answer);
    block_close(&b);
    if (flush_pending((PyObject *)self) < 0)
        Py_CLEAR(result);
    return result;
}

/* `preparer.prepare_block(records, None, data, pos, base, k, most)`: in the forked copy of
 * `slim.read_whole_file`, append to the list `records` the record (k, offset, length, id,
 * parentId, stand-in) of each complete line of data[pos:] that `prepare_line` takes (k: the
 * line's number counted from the copy's first line; `k` given is the line before data[pos]),
 * and (k, offset, length) for the last line of each run of blank lines, up to the first line
 * it does not take (`block_result`), or until `records` holds `most` records (code 2: the
 * caller writes them out and calls again; the copy's memory stays bounded). */
static PyObject *Preparer_prepare_block(Preparer *self, PyObject *const *args, Py_ssize_t nargs)
{
    const char *data;
    Py_ssize_t size, pos, base, k;
    PyObject *answer = NULL, *result = NULL;
    Records out;
    int code = 0;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "prepare_block takes 7 arguments");
        return NULL;
    }
    if (not_initialized(self) || block_args(args, 6, "prepare_block", &data, &size, &pos, &base, &k) < 0)
        return NULL;
    if (!PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "prepare_block: records must be a list");
        return NULL;
    }
    out.records = args[0];
    out.most = PyLong_AsSsize_t(args[6]);
    if (out.most == -1 && PyErr_Occurred())
        return NULL;
    if (out.most < 1) {
        PyErr_SetString(PyExc_ValueError, "prepare_block: most must be at least 1");
        return NULL;
    }
    if (block_loop(self, data, size, &pos, base, &k, take_record, skip_record, &out, &code, &answer) == 0)
        result = block_result(pos, k, code, answer);
    Py_XDECREF(answer);
    if (flush_pending((PyObject *)self) < 0)
        Py_CLEAR(result);
    return result;
}

/* `preparer.add_records(reader, entry_type, records, index, base)`: add the copy's records
 * (`prepare_block`) from records[index] on, as `slim._add_records` adds them (line number =
 * base + k; a blank lines' record only moves the reader past them), up to the first one it
 * leaves to the caller: a record of another shape, or one `block_add` does not add. Returns
 * that index (len(records) when all were added). */
static PyObject *Preparer_add_records(Preparer *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *records;
    Py_ssize_t index, base, n, line_no = 0, end = 0;
    Block b;
    int lines = 0;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "add_records takes 5 arguments");
        return NULL;
    }
    records = args[2];
    if (!PyList_CheckExact(records)) {
        PyErr_SetString(PyExc_TypeError, "add_records: records must be a list");
        return NULL;
    }
    index = PyLong_AsSsize_t(args[3]);
    base = PyLong_AsSsize_t(args[4]);
    if ((index == -1 || base == -1) && PyErr_Occurred())
        return NULL;
    if (block_open(&b, self, args[0], args[1]) < 0)
        return NULL;
    n = PyList_GET_SIZE(records);
    for (; index < n; index++) {
        PyObject *record = PyList_GET_ITEM(records, index);
        Py_ssize_t k, offset, length;
        int r = 1;
        if (!PyTuple_CheckExact(record) || (PyTuple_GET_SIZE(record) != 6 && PyTuple_GET_SIZE(record) != 3))
            break;
        k = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 0));
        offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 1));
        length = PyLong_AsSsize_t(PyTuple_GET_ITEM(record, 2));
        if ((k == -1 || offset == -1 || length == -1) && PyErr_Occurred())
            goto fail;
        if (PyTuple_GET_SIZE(record) == 6)
            r = block_add(&b, PyTuple_GET_ITEM(record, 3), PyTuple_GET_ITEM(record, 4),
                          PyTuple_GET_ITEM(record, 5), base + k, PyTuple_GET_ITEM(record, 1), length);
        if (r < 0)
            goto fail;
        if (r == 0)
            break;
        line_no = base + k;
        end = offset + length;
        lines++;
    }
    if (block_finish(&b, line_no, end, lines) < 0) {
        block_close(&b);
        return NULL;
    }
    block_close(&b);
    return PyLong_FromSsize_t(index);
fail:
    block_finish_on_error(&b, line_no, end, lines);
    block_close(&b);
    return NULL;
}

/* `PiSessionReader._add_entry(obj, line_no, offset, length)` for the common entry of a plain
 * message line (`plain_entry`): a string id not read before, a parentId that is not a string,
 * "" or an id read before, no missing parents pending. The entry keeps the parsed object, its
 * `type`, its parentId string and its `timestamp` when a string (else ""). 1 added; 0 not this
 * case (nothing changed: the caller runs `_add_entry`); -1 error. */
/* One shared object for an equal string value: `dict[key]` replaced by the `shared` dict's
 * object equal to it (the first one seen), when it is an exact str. 0, or -1 with an exception. */
static int share_value(PyObject *shared, PyObject *dict, PyObject *key, PyObject *value)
{
    PyObject *kept;
    if (value == NULL || !PyUnicode_CheckExact(value))
        return 0;
    kept = PyDict_SetDefault(shared, value, value);
    if (kept == NULL)
        return -1;
    return kept == value ? 0 : PyDict_SetItem(dict, key, kept);  /* (same size and order) */
}

/* `reader._share(message)` (`PiSessionReader._add_entry`, issue 32): the values that repeat
 * across a session's messages made one object each, in place (equal values, so the entry reads
 * the same): the message's `_SHARED_VALUES` (role, provider, model, api, stopReason, toolName)
 * and each content block's `type` and a tool call's `name`. 0, or -1 with an exception. */
static int share_message_values(PyObject *shared, PyObject *message)
{
    PyObject *key, *value, *content;
    Py_ssize_t pos = 0, i, n;
    while (PyDict_Next(message, &pos, &key, &value)) {
        int code = key_code(key);
        if (code < 0)
            return -1;
        if ((code == K_ROLE || code == K_PROVIDER || code == K_MODEL || code == K_API || code == K_STOPREASON ||
             code == K_TOOLNAME) && share_value(shared, message, key, value) < 0)
            return -1;
    }
    content = get(message, K_CONTENT);
    if (content == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(content))
        return 0;
    n = PyList_GET_SIZE(content);
    for (i = 0; i < n; i++) {
        PyObject *block = PyList_GET_ITEM(content, i), *kind;
        if (!PyDict_CheckExact(block))
            continue;
        kind = get(block, K_TYPE);
        if (kind == NULL && PyErr_Occurred())
            return -1;
        if (share_value(shared, block, key_str[K_TYPE], kind) < 0)
            return -1;
        if (str_is(kind, s_toolCall)) {
            PyObject *name = get(block, K_NAME);
            if (name == NULL && PyErr_Occurred())
                return -1;
            if (share_value(shared, block, key_str[K_NAME], name) < 0)
                return -1;
        }
    }
    return 0;
}

static int block_add_full(Block *b, PyObject *shared, PyObject *obj, Py_ssize_t line_no, PyObject *offset,
                          Py_ssize_t length)
{
    PyObject *kind, *id, *parent, *timestamp, *values[E_COUNT];
    kind = get(obj, K_TYPE);
    id = get(obj, K_ID);
    if (PyErr_Occurred())
        return -1;
    parent = get(obj, K_PARENTID);
    if (parent == NULL && PyErr_Occurred())
        return -1;
    timestamp = get(obj, K_TIMESTAMP);
    if (timestamp == NULL && PyErr_Occurred())
        return -1;
    if (kind == NULL || !PyUnicode_CheckExact(kind) || id == NULL || !PyUnicode_CheckExact(id) ||
        PyDict_GET_SIZE(b->missing) != 0)
        return 0;
    if (PyDict_GetItemWithError(b->by_id, id) != NULL)
        return 0;  /* a duplicate id */
    if (PyErr_Occurred())
        return -1;
    if (parent != NULL && PyUnicode_Check(parent) && PyUnicode_GET_LENGTH(parent) > 0) {
        PyObject *earlier;
        if (!PyUnicode_CheckExact(parent))
            return 0;
        earlier = PyDict_GetItemWithError(b->by_id, parent);
        if (earlier == NULL)
            return PyErr_Occurred() ? -1 : 0;  /* a parent not read yet */
        if (Py_TYPE(earlier) == b->type) {  /* the parent's own id string (equal), in the entry and its object */
            PyObject *parent_id = *(PyObject **)((char *)earlier + b->offsets[E_ID]);
            if (parent_id != NULL && parent_id != parent && PyUnicode_CheckExact(parent_id)) {
                if (PyDict_SetItem(obj, key_str[K_PARENTID], parent_id) < 0)
                    return -1;
                parent = parent_id;
            }
        }
    } else {
        parent = Py_None;
    }
    if (timestamp == NULL || !PyUnicode_Check(timestamp))
        timestamp = s_empty;
    if (kind != s_message && str_is(kind, s_message)) {  /* (`plain_entry` checked it is "message") */
        if (PyDict_SetItem(obj, key_str[K_TYPE], s_message) < 0)
            return -1;
        kind = s_message;
    }
    {
        PyObject *message = get(obj, K_MESSAGE);  /* (a dict: `plain_entry` checked it) */
        if (message == NULL || share_message_values(shared, message) < 0)
            return -1;
    }
    values[E_TYPE] = kind;
    values[E_ID] = id;
    values[E_PARENT_ID] = parent;
    values[E_TIMESTAMP] = timestamp;
    values[E_RAW] = obj;
    values[E_OFFSET] = offset;
    return block_insert(b, values, line_no, length);
}

/* `preparer.feed_lines(reader, entry_type, lines, index, most)`: the full reader's short route
 * (`PiSessionReader.feed`) for lines[index:] (a list or tuple of (line_no, offset, raw)), in C:
 * each plain message line (`plain_entry`) is parsed and added (`block_add_full`) and each blank
 * line (`blank_line`) passed, up to the first line left to the caller, or after `most` lines
 * (the caller calls again: the dashboard
 * reads on a worker thread, and a call never holds the GIL for more than `most` lines).
 * Returns (index of the next line, or len(lines); True after `most` lines, else the parsed entry
 * of that line when it is plain but `block_add_full` did not add it, else None: the general
 * route). Sets the reader's `last_line_no`, `end_offset` and `leaf_id` for the lines it read.
 * The reader must be past a version-3 header. */
static PyObject *Preparer_feed_lines(Preparer *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *lines, *left = NULL, *result = NULL;
    Py_ssize_t index, n, line_no = 0, end = 0, most;
    Block b;
    int read = 0;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "feed_lines takes 5 arguments");
        return NULL;
    }
    most = PyLong_AsSsize_t(args[4]);
    if (most == -1 && PyErr_Occurred())
        return NULL;
    if (most < 1) {
        PyErr_SetString(PyExc_ValueError, "feed_lines: most must be at least 1");
        return NULL;
    }
    if (not_initialized(self))
        return NULL;
    lines = args[2];
    if (!PyList_CheckExact(lines) && !PyTuple_CheckExact(lines)) {
        PyErr_SetString(PyExc_TypeError, "feed_lines: lines must be a list or a tuple");
        return NULL;
    }
    index = PyLong_AsSsize_t(args[3]);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (block_open(&b, self, args[0], args[1]) < 0)
        return NULL;
    n = PySequence_Fast_GET_SIZE(lines);
    for (; index < n; index++) {
        PyObject *line = PySequence_Fast_GET_ITEM(lines, index), *obj, *raw, *offset;
        Py_ssize_t number, start;
        int r;
        if (read == most) {
            left = Py_NewRef(Py_True);
            break;
        }
        if (!PyTuple_Check(line) || PyTuple_GET_SIZE(line) != 3)
            break;
        offset = PyTuple_GET_ITEM(line, 1);
        raw = PyTuple_GET_ITEM(line, 2);
        number = PyLong_AsSsize_t(PyTuple_GET_ITEM(line, 0));
        if (number == -1 && PyErr_Occurred())
            goto fail;
        if (PyBytes_CheckExact(raw) && PyLong_CheckExact(offset) && PyBytes_GET_SIZE(raw) <= self->max_line_bytes &&
            blank_line(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))) {
            start = PyLong_AsSsize_t(offset);
            if (start == -1 && PyErr_Occurred())
                goto fail;
            line_no = number;
            end = start + PyBytes_GET_SIZE(raw) + 1;
            read++;
            continue;
        }
        r = plain_entry(self, offset, raw, &obj);
        if (r < 0)
            goto fail;
        if (r != PLAIN)
            break;
        start = PyLong_AsSsize_t(offset);  /* (an exact int: `plain_entry` checked it) */
        if (start == -1 && PyErr_Occurred()) {
            Py_DECREF(obj);
            goto fail;
        }
        r = block_add_full(&b, self->shared, obj, number, offset, PyBytes_GET_SIZE(raw) + 1);
        if (r <= 0) {
            if (r < 0) {
                Py_DECREF(obj);
                goto fail;
            }
            left = obj;
            break;
        }
        Py_DECREF(obj);
        line_no = number;
        end = start + PyBytes_GET_SIZE(raw) + 1;
        read++;
    }
    if (block_finish(&b, line_no, end, read) == 0)
        result = Py_BuildValue("(nO)", index, left ? left : Py_None);
    goto done;
fail:
    block_finish_on_error(&b, line_no, end, read);
done:
    Py_XDECREF(left);
    block_close(&b);
    return result;
}

static PyMethodDef Preparer_methods[] = {
    {"parse", (PyCFunction)(void (*)(void))Preparer_parse, METH_FASTCALL,
     "parse(offset, raw): the parsed entry of a plainly well-formed message line, else False."},
    {"feed_block", (PyCFunction)(void (*)(void))Preparer_feed_block, METH_FASTCALL,
     "feed_block(reader, entry_type, data, pos, base, line_no) -> (pos, line_no, code, answer)."},
    {"prepare_block", (PyCFunction)(void (*)(void))Preparer_prepare_block, METH_FASTCALL,
     "prepare_block(records, None, data, pos, base, k, most) -> (pos, k, code, answer)."},
    {"feed_lines", (PyCFunction)(void (*)(void))Preparer_feed_lines, METH_FASTCALL,
     "feed_lines(reader, entry_type, lines, index, most) -> (index of the next line, True / its parsed entry / None)."},
    {"add_records", (PyCFunction)(void (*)(void))Preparer_add_records, METH_FASTCALL,
     "add_records(reader, entry_type, records, index, base) -> the index of the first record not added."},
    {"count", (PyCFunction)Preparer_count, METH_O,
     "count(message): ledger.count_split(message, message_parts(message)), or False (not ported)."},
    {NULL},
};

static int Preparer_init(Preparer *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"loads", "decode_error", "standin", "part_count", "message_count", "shared",
                            "ledger", "kind", "js_stringify", "max_line_bytes", "max_depth", "defer_bytes", NULL};
    PyObject *loads, *decode_error, *standin, *part_count, *message_count, *shared, *ledger, *js_stringify;
    PyObject *counter, *digest_above;
    int kind;
    Py_ssize_t max_line_bytes, max_depth, defer_bytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO!OiOnnn:Preparer", names, &loads, &decode_error, &standin,
                                     &part_count, &message_count, &PyDict_Type, &shared, &ledger, &kind,
                                     &js_stringify, &max_line_bytes, &max_depth, &defer_bytes))
        return -1;
    if (kind != COUNTER_CL100K && kind != COUNTER_CHARS_V1) {
        PyErr_SetString(PyExc_ValueError, "kind: 1 (cl100k) or 2 (chars-v1)");
        return -1;
    }
    if (!PyType_Check(standin) || !PyType_IsSubtype((PyTypeObject *)standin, &PyDict_Type) ||
        !PyType_Check(part_count) || !PyType_IsSubtype((PyTypeObject *)part_count, &PyTuple_Type) ||
        !PyType_Check(message_count) || !PyType_IsSubtype((PyTypeObject *)message_count, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "standin: a dict subclass; part_count, message_count: tuple subclasses");
        return -1;
    }
    counter = PyObject_GetAttrString(ledger, "counter");
    if (counter == NULL)
        return -1;
    Py_XSETREF(self->counter, counter);
    Py_XSETREF(self->counter_name, PyObject_GetAttrString(counter, "name"));
    if (self->counter_name == NULL)
        return -1;
    self->digest_above = -1;
    Py_CLEAR(self->known);
    if (kind == COUNTER_CL100K) {
        self->known = PyObject_GetAttrString(counter, "_known");
        if (self->known == NULL)
            return -1;
        if (!PyDict_CheckExact(self->known)) {
            PyErr_SetString(PyExc_TypeError, "counter._known: a dict");
            return -1;
        }
        digest_above = PyObject_GetAttrString(counter, "_digest_above");
        if (digest_above == NULL)
            return -1;
        if (digest_above != Py_None) {
            self->digest_above = PyLong_AsSsize_t(digest_above);
            if (self->digest_above < 0) {
                Py_DECREF(digest_above);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "counter._digest_above: None or an int >= 0");
                return -1;
            }
        }
        Py_DECREF(digest_above);
    }
    Py_XSETREF(self->loads, Py_NewRef(loads));
    Py_XSETREF(self->decode_error, Py_NewRef(decode_error));
    Py_XSETREF(self->standin, Py_NewRef(standin));
    Py_XSETREF(self->part_count, Py_NewRef(part_count));
    Py_XSETREF(self->message_count, Py_NewRef(message_count));
    Py_XSETREF(self->shared, Py_NewRef(shared));
    Py_XSETREF(self->ledger, Py_NewRef(ledger));
    Py_XSETREF(self->js_stringify, Py_NewRef(js_stringify));
    Py_CLEAR(self->encode);
    self->kind = kind;
    self->max_line_bytes = max_line_bytes;
    self->max_depth = max_depth;
    self->defer_bytes = defer_bytes;
    return 0;
}

static int Preparer_traverse(Preparer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->loads);
    Py_VISIT(self->decode_error);
    Py_VISIT(self->standin);
    Py_VISIT(self->part_count);
    Py_VISIT(self->message_count);
    Py_VISIT(self->shared);
    Py_VISIT(self->ledger);
    Py_VISIT(self->counter);
    Py_VISIT(self->counter_name);
    Py_VISIT(self->known);
    Py_VISIT(self->encode);
    Py_VISIT(self->js_stringify);
    Py_VISIT(self->entry_type);
    return 0;
}

static int Preparer_clear(Preparer *self)
{
    Py_CLEAR(self->loads);
    Py_CLEAR(self->decode_error);
    Py_CLEAR(self->standin);
    Py_CLEAR(self->part_count);
    Py_CLEAR(self->message_count);
    Py_CLEAR(self->shared);
    Py_CLEAR(self->ledger);
    Py_CLEAR(self->counter);
    Py_CLEAR(self->counter_name);
    Py_CLEAR(self->known);
    Py_CLEAR(self->encode);
    Py_CLEAR(self->js_stringify);
    Py_CLEAR(self->entry_type);
    return 0;
}

static void Preparer_dealloc(Preparer *self)
{
    PyObject_GC_UnTrack(self);
    Preparer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef Preparer_members[] = {
    {"taken", T_PYSSIZET, offsetof(Preparer, taken), READONLY, "Lines answered with (id, parentId, stand-in)."},
    {"rejected", T_PYSSIZET, offsetof(Preparer, rejected), READONLY, "Lines answered with None (the general route)."},
    {"handed_back", T_PYSSIZET, offsetof(Preparer, handed_back), READONLY,
     "Lines answered with False (not ported: the Python `_prepare` runs)."},
    {NULL},
};

static PyTypeObject PreparerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ds4sessions.agents.pi._cprep.Preparer",
    .tp_basicsize = sizeof(Preparer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Preparer(loads, decode_error, standin, part_count, message_count, shared, ledger, kind,\n"
              "         js_stringify, max_line_bytes, max_depth, defer_bytes)\n\n"
              "Called as `preparer(offset, raw)`: what `SlimReader._prepare(offset, raw)` returns\n"
              "((id, parentId, StandIn) or None, with the same effects on `shared`, the ledger and its\n"
              "counter), or False for a line it does not port (nothing changed: run the Python route).\n"
              "`kind`: 1 for `Cl100kCounter`, 2 for `CharsV1Counter` (`ledger.counter`).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Preparer_init,
    .tp_call = (ternaryfunc)Preparer_call,
    .tp_traverse = (traverseproc)Preparer_traverse,
    .tp_clear = (inquiry)Preparer_clear,
    .tp_dealloc = (destructor)Preparer_dealloc,
    .tp_members = Preparer_members,
    .tp_methods = Preparer_methods,
};

/* `blake2b_16(data)` for the tests (equal to `hashlib.blake2b(data, digest_size=16).digest()`). */
static PyObject *py_blake2b_16(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    uint8_t digest[16];
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    blake2b_16((const uint8_t *)view.buf, (size_t)view.len, digest);
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)digest, 16);
}

/* `js_stringify(value)` by the C writer, or None where it hands back to Python (for the tests). */
static PyObject *py_js_stringify_plain(PyObject *module, PyObject *value)
{
    Buf b = {NULL, 0, 0};
    PyObject *result;
    int r = js_stringify_plain(&b, value);
    if (r < 0)
        result = NULL;
    else if (r == 0)
        result = Py_NewRef(Py_None);
    else
        result = PyUnicode_DecodeUTF8(b.p, b.len, NULL);
    PyMem_Free(b.p);
    return result;
}

/* `bytes_depth(raw, limit)`: `ds4sessions.ingest.limits._bytes_depth(raw, limit)`, the nesting
 * depth of `[`/`{` outside strings, in one pass: a backslash followed by a backslash or a quote
 * drops both (the Python's `replace(b"\\\\", b"").replace(b'\\"', b"")`, left to right), a
 * quote toggles "in a string", a bracket outside strings moves the depth; the deepest depth
 * reached, counting stopped once past `limit` (the Python's loop breaks there too). The GIL is
 * released during the scan (the bytes object is immutable and held by the caller). */
static PyObject *py_bytes_depth(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*n", &view, &limit))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, i = 0, depth = 0, deepest = 0;
    int in_string = 0;
    Py_BEGIN_ALLOW_THREADS
    while (i < n) {
        if (in_string) {
            /* inside a string only a backslash or a quote matters: jump to the first of them */
            const unsigned char *q = memchr(p + i, '"', (size_t)(n - i));
            Py_ssize_t end = q ? (Py_ssize_t)(q - p) : n;
            const unsigned char *b = memchr(p + i, '\\', (size_t)(end - i));
            i = b ? (Py_ssize_t)(b - p) : end;
            if (i >= n)
                break;
        }
        unsigned char c = p[i];
        if (c == '\\' && i + 1 < n && (p[i + 1] == '\\' || p[i + 1] == '"')) {
            i += 2;
            continue;
        }
        i++;
        if (c == '"') {
            in_string = !in_string;
        } else if (!in_string) {
            if (c == '[' || c == '{') {
                depth++;
                if (depth > deepest) {
                    deepest = depth;
                    if (deepest > limit)
                        break;
                }
            } else if (c == ']' || c == '}') {
                depth--;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(deepest);
}

/* ------------------------------------------------------------------ attribution */

/* A tuple of `value`'s `n` items (new ref; `value` itself when it is an exact tuple of n),
 * ValueError / TypeError as Python's unpacking raises them. */
static PyObject *unpacked(PyObject *value, Py_ssize_t n)
{
    PyObject *items;
    if (PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == n)
        return Py_NewRef(value);
    items = PySequence_Tuple(value);
    if (items == NULL)
        return NULL;
    if (PyTuple_GET_SIZE(items) != n) {
        PyErr_Format(PyExc_ValueError, "expected %zd values to unpack, got %zd", n, PyTuple_GET_SIZE(items));
        Py_DECREF(items);
        return NULL;
    }
    return items;
}

/* tokens <= 0 for an exact int (the common case) without a rich compare. */
static int not_positive(PyObject *tokens)
{
    if (PyLong_CheckExact(tokens)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(tokens, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        return overflow ? overflow < 0 : v <= 0;
    }
    return PyObject_RichCompareBool(tokens, zero, Py_LE);
}

/* mapping[key] = mapping.get(key, 0) + tokens. */
static int add_to(PyObject *mapping, PyObject *key, PyObject *tokens)
{
    PyObject *was = PyDict_GetItemWithError(mapping, key), *sum;
    int r;
    if (was == NULL) {
        if (PyErr_Occurred())
            return -1;
        return PyDict_SetItem(mapping, key, tokens);
    }
    sum = PyNumber_Add(was, tokens);
    if (sum == NULL)
        return -1;
    r = PyDict_SetItem(mapping, key, sum);
    Py_DECREF(sum);
    return r;
}

/* `attribute(messages, entry_ids, count, counted_name, in_llm_context, segment, standin)`:
 * `ds4core.categories.attribute(messages, entry_ids, ledger)` (no `previous`) for a list of
 * messages, as (totals, children, segments, message_tokens, total). `count` is `ledger.count`;
 * `in_llm_context` the Python rule (asked for a message that is not a dict with a string or
 * absent role); `segment` the `Segment` type. When `counted_name` is a string, a message of
 * type `standin` whose `counted` is (counted_name, count) is answered by that count without
 * calling `count` (what `StandInLedger.count` returns for it; the caller passes None for any
 * other ledger). The same values, in the same order, as the Python loop
 * (tests/sessions/test_c_attribute.py). */
static PyObject *py_attribute(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *messages, *entry_ids, *count, *counted_name, *rule, *segment, *standin;
    PyObject *totals = NULL, *children = NULL, *segments = NULL, *per_message = NULL, *total = NULL;
    PyObject *result = NULL, *last = NULL;
    Py_ssize_t i, n, known_ids;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "attribute takes 7 arguments");
        return NULL;
    }
    messages = args[0];
    entry_ids = args[1];
    count = args[2];
    counted_name = args[3];
    rule = args[4];
    segment = args[5];
    standin = args[6];
    if (!PyList_CheckExact(messages) || !PyList_CheckExact(entry_ids) || !PyType_Check(segment) ||
        !PyType_IsSubtype((PyTypeObject *)segment, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "attribute: messages and entry_ids lists, segment a tuple type");
        return NULL;
    }
    totals = PyDict_New();
    children = PyDict_New();
    segments = PyList_New(0);
    per_message = PyList_New(0);
    total = Py_NewRef(zero);
    if (totals == NULL || children == NULL || segments == NULL || per_message == NULL)
        goto done;
    n = PyList_GET_SIZE(messages);
    for (i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *counted = NULL, *message_total, *parts, *entry_id, *index;
        Py_ssize_t k, m;
        int in_context;
        Py_INCREF(message);
        if (PyDict_Check(message) && (Py_IS_TYPE(message, &PyDict_Type) || (PyObject *)Py_TYPE(message) == standin)) {
            PyObject *role = PyDict_GetItemWithError(message, key_str[K_ROLE]);
            if (role == NULL && PyErr_Occurred())
                goto fail_message;
            in_context = (role == NULL || role == Py_None || PyUnicode_CheckExact(role)) ? in_llm_context(message, role) : -2;
        } else {
            in_context = -2;
        }
        if (in_context == -2) {  /* the Python rule */
            PyObject *answer = PyObject_CallOneArg(rule, message);
            if (answer == NULL)
                goto fail_message;
            in_context = PyObject_IsTrue(answer);
            Py_DECREF(answer);
        }
        if (in_context < 0)
            goto fail_message;
        if (!in_context) {
            if (PyList_Append(per_message, zero) < 0)
                goto fail_message;
            Py_DECREF(message);
            continue;
        }
        if (counted_name != Py_None && (PyObject *)Py_TYPE(message) == standin) {
            PyObject *slot = PyObject_GetAttr(message, s_counted);
            if (slot == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                    goto fail_message;
                PyErr_Clear();
            } else {
                if (PyTuple_CheckExact(slot) && PyTuple_GET_SIZE(slot) == 2) {
                    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(slot, 0), counted_name, Py_EQ);
                    if (same < 0) {
                        Py_DECREF(slot);
                        goto fail_message;
                    }
                    if (same)
                        counted = Py_NewRef(PyTuple_GET_ITEM(slot, 1));
                }
                Py_DECREF(slot);
            }
        }
        if (counted == NULL) {
            counted = PyObject_CallOneArg(count, message);
            if (counted == NULL)
                goto fail_message;
        }
        {  /* message_total, parts = counted (as Python unpacks it; the same objects for tuples) */
            PyObject *pair = unpacked(counted, 2);
            Py_DECREF(counted);
            if (pair == NULL)
                goto fail_message;
            counted = pair;
        }
        message_total = PyTuple_GET_ITEM(counted, 0);
        parts = PySequence_Tuple(PyTuple_GET_ITEM(counted, 1));
        if (parts == NULL)
            goto fail_counted;
        if (PyList_Append(per_message, message_total) < 0)
            goto fail_parts;
        {
            PyObject *sum = PyNumber_Add(total, message_total);
            if (sum == NULL)
                goto fail_parts;
            Py_SETREF(total, sum);
        }
        known_ids = PyList_GET_SIZE(entry_ids);
        entry_id = i < known_ids ? PyList_GET_ITEM(entry_ids, i) : Py_None;
        index = NULL;
        m = PyTuple_GET_SIZE(parts);
        for (k = 0; k < m; k++) {
            PyObject *part = unpacked(PyTuple_GET_ITEM(parts, k), 3), *category, *child, *tokens, *items[4], *made;
            int r;
            if (part == NULL)
                goto fail_index;
            category = PyTuple_GET_ITEM(part, 0);
            child = PyTuple_GET_ITEM(part, 1);
            tokens = PyTuple_GET_ITEM(part, 2);
            Py_DECREF(part);  /* (its items stay alive: `parts` holds the part, or a tuple of it) */
            r = not_positive(tokens);
            if (r < 0)
                goto fail_index;
            if (r)
                continue;
            if (add_to(totals, category, tokens) < 0)
                goto fail_index;
            if (child != Py_None) {
                PyObject *kids = PyDict_GetItemWithError(children, category);
                if (kids == NULL) {
                    if (PyErr_Occurred())
                        goto fail_index;
                    kids = PyDict_New();
                    if (kids == NULL || PyDict_SetItem(children, category, kids) < 0) {
                        Py_XDECREF(kids);
                        goto fail_index;
                    }
                    Py_DECREF(kids);
                }
                if (add_to(kids, child, tokens) < 0)
                    goto fail_index;
            }
            if (index == NULL) {
                index = PyLong_FromSsize_t(i);
                if (index == NULL)
                    goto fail_index;
            }
            if (last != NULL) {
                int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 0), category, Py_EQ);
                if (same < 0)
                    goto fail_index;
                if (same) {
                    same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 2), index, Py_EQ);
                    if (same < 0)
                        goto fail_index;
                }
                if (same) {  /* segments[-1] = (category, last.tokens + tokens, index, entry_id) */
                    PyObject *sum = PyNumber_Add(PyTuple_GET_ITEM(last, 1), tokens);
                    if (sum == NULL)
                        goto fail_index;
                    items[0] = category;
                    items[1] = sum;
                    items[2] = index;
                    items[3] = entry_id;
                    made = named_tuple(segment, items, 4);
                    Py_DECREF(sum);
                    if (made == NULL || PyList_SetItem(segments, PyList_GET_SIZE(segments) - 1, Py_NewRef(made)) < 0) {
                        Py_XDECREF(made);
                        goto fail_index;
                    }
                    Py_SETREF(last, made);
                    continue;
                }
            }
            items[0] = category;
            items[1] = tokens;
            items[2] = index;
            items[3] = entry_id;
            made = named_tuple(segment, items, 4);
            if (made == NULL || PyList_Append(segments, made) < 0) {
                Py_XDECREF(made);
                goto fail_index;
            }
            Py_XSETREF(last, made);
        }
        Py_XDECREF(index);
        Py_DECREF(parts);
        Py_DECREF(counted);
        Py_DECREF(message);
        continue;
    fail_index:
        Py_XDECREF(index);
    fail_parts:
        Py_DECREF(parts);
    fail_counted:
        Py_DECREF(counted);
    fail_message:
        Py_DECREF(message);
        goto done;
    }
    result = PyTuple_Pack(5, totals, children, segments, per_message, total);
done:
    Py_XDECREF(last);
    Py_XDECREF(totals);
    Py_XDECREF(children);
    Py_XDECREF(segments);
    Py_XDECREF(per_message);
    Py_XDECREF(total);
    return result;
}

/* ------------------------------------------------------------------ turns */

enum { T_INDEX, T_TIME, T_PROMPT, T_TOOL_CALLS, T_TOKENS, T_FIRST, T_LAST, T_ENTRY_IDS, T_FIELDS };
static const char *turn_fields[T_FIELDS] = {"index", "time", "prompt", "tool_calls", "tokens", "first_message",
                                            "last_message", "entry_ids"};

/* The message's role (borrowed; NULL when absent) of an exact dict or a `standin`. */
static int role_of(PyObject *message, PyObject **role)
{
    *role = PyDict_GetItemWithError(message, key_str[K_ROLE]);
    return (*role == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* `live._tool_calls(messages, start, end)`; -2 when a message or content block is of a shape
 * the Python function must read (not an exact dict / stand-in, a content that is not a list,
 * tuple or string), -1 error. */
static Py_ssize_t tool_calls(PyObject *messages, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t i, calls = 0;
    for (i = start; i < end; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *role, *content;
        Py_ssize_t k, n;
        if (role_of(message, &role) < 0)
            return -1;
        if (!str_is(role, s_assistant))
            continue;
        content = get(message, K_CONTENT);
        if (content == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        if (PyUnicode_CheckExact(content) || content == Py_None)
            continue;  /* (a string's items are strings, never a call; None: `or ()`) */
        if (!PyList_CheckExact(content) && !PyTuple_CheckExact(content))
            return -2;
        n = PySequence_Fast_GET_SIZE(content);
        for (k = 0; k < n; k++) {
            PyObject *block = PySequence_Fast_GET_ITEM(content, k);
            int error = 0;
            if (!PyDict_CheckExact(block)) {
                if (PyDict_Check(block) || !PyUnicode_CheckExact(block))
                    return -2;  /* (a Mapping, or anything else: the Python test) */
                continue;
            }
            if (block_type_is(block, s_toolCall, &error))
                calls++;
            if (error)
                return -1;
        }
    }
    return calls;
}

/* ---- a turn's local time ---------------------------------------------------------------- */

/* The last zone `zone_of` gave, by (UTC offset, name): most turns of a session share one. */
static PyObject *zone_factory, *zone_cached;
static long zone_gmtoff;
static char zone_name[64];

/* CPython 3.11's `_PyTime_RoundHalfEven` (Python/pytime.c). */
static double round_half_even(double x)
{
    double rounded = round(x);
    if (fabs(x - rounded) == 0.5)
        rounded = 2.0 * round(x / 2.0);
    return rounded;
}

/* 1 when `t` (seconds since the epoch, UTC) is a time from year 1 to 9999, with its broken-down
 * UTC fields in *tm; else 0. */
static int utc_fields(long long t, struct tm *tm)
{
    time_t when = (time_t)t;
    if ((long long)when != t || gmtime_r(&when, tm) == NULL)
        return 0;
    return tm->tm_year + 1900 >= 1 && tm->tm_year + 1900 <= 9999;
}

/* `local_time(ms, zone_of)`: `live._local_time(ms)`, i.e.
 * `datetime.fromtimestamp(ms / 1000, tz=utc).astimezone(zone)` with
 * `zone = zone_of(tm_gmtoff, tm_zone)` of `time.localtime` at the instant's whole seconds
 * (CPython's `astimezone()` rule, `local_timezone_from_timestamp` in _datetimemodule.c), or
 * None for a time `datetime` cannot hold (before year 1 or after 9999, at either end), NaN or
 * infinity. `ms` is an int or a float (not a bool: the caller checks). The seconds and
 * microseconds are those of `datetime.fromtimestamp` (CPython 3.11 `_PyTime_ObjectToTimeval`,
 * round half to even); `ms / 1000` of an int is exact below 2**53, and any int beyond that is
 * out of range anyway. New reference, or NULL with an exception (raised by `zone_of`). */
static PyObject *local_time_of(PyObject *ms, PyObject *zone_of)
{
    double d, intpart, frac;
    long long sec;
    long us;
    struct tm utc, local;
    time_t when;
    if (PyLong_Check(ms)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(ms, &overflow);
        if (value == -1 && PyErr_Occurred())
            return NULL;
        if (overflow || value > (1LL << 53) || value < -(1LL << 53))
            Py_RETURN_NONE;
        d = (double)value / 1000.0;
    } else if (PyFloat_Check(ms)) {
        d = PyFloat_AS_DOUBLE(ms) / 1000.0;
    } else {
        PyErr_SetString(PyExc_TypeError, "local_time: an int or a float");
        return NULL;
    }
    if (!isfinite(d) || fabs(d) > 1e15)
        Py_RETURN_NONE;
    frac = modf(d, &intpart);
    frac = round_half_even(frac * 1e6);
    if (frac >= 1e6) {
        frac -= 1e6;
        intpart += 1.0;
    } else if (frac < 0) {
        frac += 1e6;
        intpart -= 1.0;
    }
    sec = (long long)intpart;
    us = (long)frac;
    if (!utc_fields(sec, &utc))
        Py_RETURN_NONE;
    when = (time_t)sec;
    if (localtime_r(&when, &local) == NULL)
        Py_RETURN_NONE;
    if (!utc_fields(sec + local.tm_gmtoff, &utc))  /* the local time, as `astimezone` makes it */
        Py_RETURN_NONE;
    {
        const char *name = local.tm_zone != NULL ? local.tm_zone : "";
        if (zone_cached == NULL || zone_factory != zone_of || zone_gmtoff != local.tm_gmtoff ||
            strncmp(zone_name, name, sizeof zone_name) != 0 || strlen(name) >= sizeof zone_name) {
            PyObject *offset = PyLong_FromLong(local.tm_gmtoff), *label, *zone;
            if (offset == NULL)
                return NULL;
            label = PyUnicode_DecodeLocale(name, "surrogateescape");  /* as `time.localtime` */
            if (label == NULL) {
                Py_DECREF(offset);
                return NULL;
            }
            zone = PyObject_CallFunctionObjArgs(zone_of, offset, label, NULL);
            Py_DECREF(offset);
            Py_DECREF(label);
            if (zone == NULL)
                return NULL;
            Py_XSETREF(zone_cached, zone);
            Py_XSETREF(zone_factory, Py_NewRef(zone_of));
            zone_gmtoff = local.tm_gmtoff;
            strncpy(zone_name, name, sizeof zone_name - 1);
            zone_name[sizeof zone_name - 1] = '\0';
        }
    }
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, (int)us,
        zone_cached, PyDateTimeAPI->DateTimeType);
}

static PyObject *py_local_time(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "local_time takes 2 arguments");
        return NULL;
    }
    if (PyBool_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "local_time: an int or a float");
        return NULL;
    }
    return local_time_of(args[0], args[1]);
}

/* What `close` reads, for `close_turn`. */
typedef struct {
    PyObject *messages, *entry_ids, *tokens, *numbers, *local_time /* its `zone_of` */, *preview;
    PyTypeObject *type;
    Py_ssize_t offsets[T_FIELDS];
} Turns;

/* `close(end)` of `live._extend_turns` with no previous turn: the turn of messages[start:end]
 * (new ref in *turn; NULL when end <= start); 0 done, -1 error, -2 a shape for Python. */
static int close_turn(Turns *t, Py_ssize_t start, Py_ssize_t end, Py_ssize_t number, PyObject **turn)
{
    PyObject *first, *role, *values[T_FIELDS], *sum;
    Py_ssize_t calls, k, m, known_ids = PyList_GET_SIZE(t->entry_ids);
    int f, is_prompt;
    *turn = NULL;
    if (end <= start)
        return 0;
    first = PyList_GET_ITEM(t->messages, start);
    if (role_of(first, &role) < 0)
        return -1;
    is_prompt = str_is(role, s_user);
    calls = tool_calls(t->messages, start, end);
    if (calls < 0)
        return (int)calls;
    memset(values, 0, sizeof values);
    {  /* the first message's time, for every turn */
        PyObject *ts = get(first, K_TIMESTAMP);
        if (ts == NULL && PyErr_Occurred())
            return -1;
        if (ts != NULL && (PyLong_Check(ts) || PyFloat_Check(ts)) && !PyBool_Check(ts))
            values[T_TIME] = local_time_of(ts, t->local_time);
        else
            values[T_TIME] = Py_NewRef(Py_None);
        if (values[T_TIME] == NULL)
            return -1;
    }
    if (is_prompt) {
        PyObject *eid = start < known_ids ? PyList_GET_ITEM(t->entry_ids, start) : Py_None, *content;
        int truth = PyObject_IsTrue(eid);  /* `eid or ""` */
        if (truth < 0)
            goto fail;
        values[T_INDEX] = PyDict_GetItemWithError(t->numbers, truth ? eid : s_empty);
        if (values[T_INDEX] != NULL)
            Py_INCREF(values[T_INDEX]);
        else if (!PyErr_Occurred())
            values[T_INDEX] = PyLong_FromSsize_t(number);
        if (values[T_INDEX] == NULL)
            goto fail;
        content = get(first, K_CONTENT);
        if (content == NULL && PyErr_Occurred())
            goto fail;
        values[T_PROMPT] = PyObject_CallOneArg(t->preview, content ? content : Py_None);
    } else {
        values[T_INDEX] = Py_NewRef(zero);
        values[T_PROMPT] = PyUnicode_FromString("(before the first prompt)");
    }
    values[T_TOOL_CALLS] = PyLong_FromSsize_t(calls);
    sum = Py_NewRef(zero);  /* sum(tokens[start:end]) */
    for (k = start; k < end && sum != NULL; k++)
        Py_SETREF(sum, PyNumber_Add(sum, PyList_GET_ITEM(t->tokens, k)));
    values[T_TOKENS] = sum;
    values[T_FIRST] = PyLong_FromSsize_t(start);
    values[T_LAST] = PyLong_FromSsize_t(end - 1);
    m = 0;  /* `_ids`: the ids that are not None */
    for (k = start; k < end && k < known_ids; k++)
        m += PyList_GET_ITEM(t->entry_ids, k) != Py_None;
    values[T_ENTRY_IDS] = PyTuple_New(m);
    if (values[T_ENTRY_IDS] != NULL) {
        m = 0;
        for (k = start; k < end && k < known_ids; k++) {
            PyObject *eid = PyList_GET_ITEM(t->entry_ids, k);
            if (eid != Py_None)
                PyTuple_SET_ITEM(values[T_ENTRY_IDS], m++, Py_NewRef(eid));
        }
    }
    for (f = 0; f < T_FIELDS; f++)
        if (values[f] == NULL)
            goto fail;
    *turn = t->type->tp_alloc(t->type, 0);
    if (*turn == NULL)
        goto fail;
    for (f = 0; f < T_FIELDS; f++)
        *(PyObject **)((char *)*turn + t->offsets[f]) = values[f];  /* (the references move) */
    return 0;
fail:
    for (f = 0; f < T_FIELDS; f++)
        Py_XDECREF(values[f]);
    return -1;
}

/* The suffix `isoformat()` writes after the time for a datetime whose tzinfo is `zone` (a
 * `datetime.timezone`: one fixed offset), cached for the last zone; NULL with an exception. */
static PyObject *iso_zone, *iso_suffix;

static PyObject *zone_suffix(PyObject *when)
{
    PyObject *zone = ((PyDateTime_DateTime *)when)->tzinfo, *text;
    Py_ssize_t n, cut;
    if (zone == iso_zone && iso_suffix != NULL)
        return iso_suffix;
    text = PyObject_CallMethod(when, "isoformat", NULL);
    if (text == NULL)
        return NULL;
    n = PyUnicode_GET_LENGTH(text);
    cut = PyDateTime_DATE_GET_MICROSECOND(when) ? 26 : 19;  /* YYYY-MM-DDTHH:MM:SS[.ffffff] */
    Py_XSETREF(iso_suffix, n >= cut ? PyUnicode_Substring(text, cut, n) : NULL);
    Py_DECREF(text);
    if (iso_suffix == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "turn_rows: an isoformat too short");
        return NULL;
    }
    Py_XSETREF(iso_zone, Py_NewRef(zone));
    return iso_suffix;
}

/* `when.isoformat()` of a datetime: written here for an exact `datetime.datetime` whose tzinfo is
 * a `datetime.timezone` (its offset's text cached by `zone_suffix`), else by the method. */
static PyObject *iso_time(PyObject *when)
{
    char buf[40];
    PyObject *suffix, *main, *result;
    int us;
    if (!PyDateTime_CheckExact(when) || !((PyDateTime_DateTime *)when)->hastzinfo ||
        Py_TYPE(((PyDateTime_DateTime *)when)->tzinfo) != Py_TYPE(PyDateTimeAPI->TimeZone_UTC))
        return PyObject_CallMethod(when, "isoformat", NULL);
    suffix = zone_suffix(when);
    if (suffix == NULL)
        return NULL;
    us = PyDateTime_DATE_GET_MICROSECOND(when);
    if (us)
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06d", PyDateTime_GET_YEAR(when),
                 PyDateTime_GET_MONTH(when), PyDateTime_GET_DAY(when), PyDateTime_DATE_GET_HOUR(when),
                 PyDateTime_DATE_GET_MINUTE(when), PyDateTime_DATE_GET_SECOND(when), us);
    else
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", PyDateTime_GET_YEAR(when), PyDateTime_GET_MONTH(when),
                 PyDateTime_GET_DAY(when), PyDateTime_DATE_GET_HOUR(when), PyDateTime_DATE_GET_MINUTE(when),
                 PyDateTime_DATE_GET_SECOND(when));
    main = PyUnicode_FromString(buf);
    if (main == NULL)
        return NULL;
    result = PyUnicode_Concat(main, suffix);
    Py_DECREF(main);
    return result;
}

/* `turn_rows(turns, turn_type)`: the "turns" of `ds4tui.mapdata.map_json`, one dict per turn:
 * {"index", "time" (`time.isoformat()` or None), "prompt", "toolCalls", "tokens", "entryIds"
 * (a list)}, for a tuple or list of `turn_type` objects (a frozen dataclass with slots). */
static PyObject *py_turn_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static PyObject *k_index, *k_time, *k_prompt, *k_calls, *k_tokens, *k_ids;
    Py_ssize_t offsets[T_FIELDS], i, n;
    PyObject *turns, *rows;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "turn_rows takes 2 arguments");
        return NULL;
    }
    turns = args[0];
    if (!PyTuple_CheckExact(turns) && !PyList_CheckExact(turns)) {
        PyErr_SetString(PyExc_TypeError, "turn_rows: a tuple or list of turns");
        return NULL;
    }
    if (slot_layout(args[1], turn_fields, T_FIELDS, offsets) < 0)
        return NULL;
    if (k_ids == NULL && (!(k_index = PyUnicode_InternFromString("index")) || !(k_time = PyUnicode_InternFromString("time")) ||
                          !(k_prompt = PyUnicode_InternFromString("prompt")) ||
                          !(k_calls = PyUnicode_InternFromString("toolCalls")) ||
                          !(k_tokens = PyUnicode_InternFromString("tokens")) ||
                          !(k_ids = PyUnicode_InternFromString("entryIds"))))
        return NULL;
    n = PySequence_Fast_GET_SIZE(turns);
    rows = PyList_New(n);
    if (rows == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *turn = PySequence_Fast_GET_ITEM(turns, i), *row, *when, *ids, *time_text, *id_list;
        if ((PyObject *)Py_TYPE(turn) != args[1]) {
            PyErr_SetString(PyExc_TypeError, "turn_rows: a turn of another type");
            goto fail;
        }
#define TURN_SLOT(f) (*(PyObject **)((char *)turn + offsets[f]))
        when = TURN_SLOT(T_TIME);
        ids = TURN_SLOT(T_ENTRY_IDS);
        if (when == NULL || ids == NULL || TURN_SLOT(T_INDEX) == NULL || TURN_SLOT(T_PROMPT) == NULL ||
            TURN_SLOT(T_TOOL_CALLS) == NULL || TURN_SLOT(T_TOKENS) == NULL) {
            PyErr_SetString(PyExc_AttributeError, "turn_rows: a turn without its fields");
            goto fail;
        }
        time_text = when == Py_None ? Py_NewRef(Py_None) : iso_time(when);
        if (time_text == NULL)
            goto fail;
        id_list = PySequence_List(ids);
        row = id_list != NULL ? PyDict_New() : NULL;
        if (row == NULL || PyDict_SetItem(row, k_index, TURN_SLOT(T_INDEX)) < 0 || PyDict_SetItem(row, k_time, time_text) < 0 ||
            PyDict_SetItem(row, k_prompt, TURN_SLOT(T_PROMPT)) < 0 ||
            PyDict_SetItem(row, k_calls, TURN_SLOT(T_TOOL_CALLS)) < 0 ||
            PyDict_SetItem(row, k_tokens, TURN_SLOT(T_TOKENS)) < 0 || PyDict_SetItem(row, k_ids, id_list) < 0) {
            Py_XDECREF(row);
            Py_XDECREF(id_list);
            Py_DECREF(time_text);
            goto fail;
        }
#undef TURN_SLOT
        Py_DECREF(id_list);
        Py_DECREF(time_text);
        PyList_SET_ITEM(rows, i, row);
    }
    return rows;
fail:
    Py_DECREF(rows);
    return NULL;
}

/* `turns(messages, entry_ids, tokens, turn_numbers, turn_type, local_time, preview, standin)`:
 * `live.build_turns(messages, entry_ids, tokens, turn_numbers)` (`_extend_turns` with no
 * previous turn) as a tuple of `turn_type` objects made without their `__init__` (a frozen
 * dataclass with slots: the same field values), calling `local_time(ms)` and
 * `preview(content)` (the Python `_local_time` and `_preview`) for each prompt. None (nothing
 * made) when a message is not an exact dict or a `standin`, or a content or block is of a
 * shape the Python loop must read. */
static PyObject *py_turns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Turns t;
    PyObject *made, *turn, *standin, *result;
    Py_ssize_t i, n, start = 0, number = 0;
    int r;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "turns takes 8 arguments");
        return NULL;
    }
    t.messages = args[0];
    t.entry_ids = args[1];
    t.tokens = args[2];
    t.numbers = args[3];
    t.local_time = args[5];
    t.preview = args[6];
    standin = args[7];
    if (!PyList_CheckExact(t.messages) || !PyList_CheckExact(t.entry_ids) || !PyList_CheckExact(t.tokens) ||
        !PyDict_CheckExact(t.numbers)) {
        PyErr_SetString(PyExc_TypeError, "turns: lists of messages, entry ids and tokens, a dict of numbers");
        return NULL;
    }
    if (slot_layout(args[4], turn_fields, T_FIELDS, t.offsets) < 0)
        return NULL;
    t.type = (PyTypeObject *)args[4];
    n = PyList_GET_SIZE(t.messages);
    if (PyList_GET_SIZE(t.tokens) < n)  /* (the Python sums of a shorter list) */
        Py_RETURN_NONE;
    for (i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(t.messages, i);
        if (!PyDict_CheckExact(message) && (PyObject *)Py_TYPE(message) != standin)
            Py_RETURN_NONE;
    }
    made = PyList_New(0);
    if (made == NULL)
        return NULL;
    for (i = 0; i <= n; i++) {
        int is_user = 0;
        if (i < n) {
            PyObject *role;
            if (role_of(PyList_GET_ITEM(t.messages, i), &role) < 0)
                goto fail;
            is_user = str_is(role, s_user);
            if (!(is_user && i > start)) {
                number += is_user;
                continue;
            }
        }
        r = close_turn(&t, start, i, number, &turn);
        if (r == -2) {
            Py_DECREF(made);
            Py_RETURN_NONE;
        }
        if (r < 0)
            goto fail;
        if (turn != NULL) {
            r = PyList_Append(made, turn);
            Py_DECREF(turn);
            if (r < 0)
                goto fail;
        }
        start = i;
        number += is_user;
    }
    result = PyList_AsTuple(made);
    Py_DECREF(made);
    return result;
fail:
    Py_DECREF(made);
    return NULL;
}

/* ------------------------------------------------------------------ branch and context scans */

/* The message of an entry's `raw` (what `Entry.message` returns for a "message" entry, and
 * `raw` itself for a stand-in): borrowed, NULL for none; -1 with an exception. */
static int entry_message(PyObject *raw, PyObject *standin, PyObject **message)
{
    *message = NULL;
    if ((PyObject *)Py_TYPE(raw) == standin) {
        *message = raw;
        return 0;
    }
    if (!PyDict_CheckExact(raw))
        return -2;  /* (a dict subclass: its own `get`) */
    *message = PyDict_GetItemWithError(raw, s_message);
    if (*message == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyDict_Check(*message))
        *message = NULL;
    return 0;
}

/* `context_messages(selected, compaction, entry_type, standin, other)`: the message loop of
 * `context.build_context` with no context edit in force: for each entry of `selected` (a list
 * of `entry_type` objects), its message when it is a `message` entry other than `compaction`
 * whose message (the `standin` raw itself, or an exact dict raw's dict `message`) is a
 * `standin` or an exact dict with a `content` that is not None; else each message of
 * `other(entry, entry is compaction)` (the Python `_entry_messages`, an iterable). Returns
 * (messages, entry ids), two new lists. */
static PyObject *py_context_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fields[3] = {"type", "id", "raw"};
    PyObject *selected, *compaction, *standin, *other, *messages = NULL, *ids = NULL, *result;
    Py_ssize_t offsets[3], i, n;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "context_messages takes 5 arguments");
        return NULL;
    }
    selected = args[0];
    compaction = args[1];
    standin = args[3];
    other = args[4];
    if (!PyList_CheckExact(selected)) {
        PyErr_SetString(PyExc_TypeError, "context_messages: a list of entries");
        return NULL;
    }
    if (slot_layout(args[2], fields, 3, offsets) < 0)
        return NULL;
    n = PyList_GET_SIZE(selected);
    messages = PyList_New(0);
    ids = PyList_New(0);
    if (messages == NULL || ids == NULL)
        goto fail;
    for (i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(selected, i), *kind, *id, *raw, *message = NULL, *made, *iterator, *item;
        int plain = (PyObject *)Py_TYPE(entry) == args[2];
        kind = plain ? *(PyObject **)((char *)entry + offsets[0]) : NULL;
        id = plain ? *(PyObject **)((char *)entry + offsets[1]) : NULL;
        raw = plain ? *(PyObject **)((char *)entry + offsets[2]) : NULL;
        if (kind != NULL && id != NULL && raw != NULL && entry != compaction && PyUnicode_CheckExact(kind) &&
            str_is(kind, s_message)) {
            if ((PyObject *)Py_TYPE(raw) == standin) {
                message = raw;
            } else if (PyDict_CheckExact(raw)) {
                message = PyDict_GetItemWithError(raw, s_message);
                if (message == NULL && PyErr_Occurred())
                    goto fail;
            }
            if (message != NULL && (PyDict_CheckExact(message) || (PyObject *)Py_TYPE(message) == standin)) {
                PyObject *content = PyDict_GetItemWithError(message, key_str[K_CONTENT]);
                if (content == NULL && PyErr_Occurred())
                    goto fail;
                if (content != Py_None) {  /* (absent: `get("content", ...)` is not None) */
                    if (PyList_Append(messages, message) < 0 || PyList_Append(ids, id) < 0)
                        goto fail;
                    continue;
                }
            }
        }
        made = PyObject_CallFunctionObjArgs(other, entry, entry == compaction ? Py_True : Py_False, NULL);
        if (made == NULL)
            goto fail;
        iterator = PyObject_GetIter(made);
        Py_DECREF(made);
        if (iterator == NULL)
            goto fail;
        Py_XINCREF(id);
        while ((item = PyIter_Next(iterator)) != NULL) {
            int r = PyList_Append(messages, item);
            Py_DECREF(item);
            if (r == 0 && id == NULL)  /* (an entry this loop does not read: `entry.id` as Python reads it) */
                id = PyObject_GetAttrString(entry, "id");
            if (r < 0 || id == NULL || PyList_Append(ids, id) < 0) {
                Py_DECREF(iterator);
                Py_XDECREF(id);
                goto fail;
            }
        }
        Py_DECREF(iterator);
        Py_XDECREF(id);
        if (PyErr_Occurred())
            goto fail;
    }
    result = PyTuple_Pack(2, messages, ids);
    Py_DECREF(messages);
    Py_DECREF(ids);
    return result;
fail:
    Py_XDECREF(messages);
    Py_XDECREF(ids);
    return NULL;
}

/* `linear_path(entries, by_id, entry_type)`: `context.branch_path(session)` from the last entry
 * (the default leaf) without a dict lookup per entry, for a session whose entries form one
 * chain in file order: each an `entry_type` object (slots) with a string id, no id used twice
 * (`by_id` holds as many ids as there are entries), each entry's parent the entry before it
 * (the same string), and the first one's parent None or an id no entry has. The walk from the
 * last entry then meets every entry, last to first, and stops after the first: a new list
 * equal to `entries`. None for any other session (the walk answers). */
static PyObject *py_linear_path(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fields[2] = {"id", "parent_id"};
    PyObject *entries, *by_id, *previous = NULL;
    Py_ssize_t offsets[2], i, n;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "linear_path takes 3 arguments");
        return NULL;
    }
    entries = args[0];
    by_id = args[1];
    if (!PyList_CheckExact(entries) || !PyDict_CheckExact(by_id)) {
        PyErr_SetString(PyExc_TypeError, "linear_path: a list of entries and a dict");
        return NULL;
    }
    if (slot_layout(args[2], fields, 2, offsets) < 0)
        return NULL;
    n = PyList_GET_SIZE(entries);
    if (n == 0 || PyDict_GET_SIZE(by_id) != n)
        Py_RETURN_NONE;
    for (i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i), *id, *parent;
        if ((PyObject *)Py_TYPE(entry) != args[2])
            Py_RETURN_NONE;
        id = *(PyObject **)((char *)entry + offsets[0]);
        parent = *(PyObject **)((char *)entry + offsets[1]);
        if (id == NULL || parent == NULL || !PyUnicode_CheckExact(id))
            Py_RETURN_NONE;
        if (i == 0) {
            if (parent != Py_None) {
                int known;
                if (!PyUnicode_CheckExact(parent))
                    Py_RETURN_NONE;
                known = PyDict_Contains(by_id, parent);
                if (known < 0)
                    return NULL;
                if (known)
                    Py_RETURN_NONE;
            }
        } else if (parent != previous && (!PyUnicode_CheckExact(parent) || PyUnicode_Compare(parent, previous) != 0)) {
            if (PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        previous = id;
    }
    return PyList_GetSlice(entries, 0, n);
}

/* `branch_scan(branch_entry_ids, by_id, entry_type, standin)`: `live._branch_scan` over the
 * branch's entry ids with the reader's id index (a dict of `entry_type` objects; or the list of
 * the branch's entries, when `by_id[branch_entry_ids[i]]` is known to be its i-th entry):
 * (the position of the last compaction or None, {prompt entry id: its turn number}), or None
 * when an entry's `raw` or a message is of a shape the Python loop must read. */
static PyObject *py_branch_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fields[2] = {"type", "raw"};
    PyObject *ids, *by_id, *standin, *numbers = NULL, *last = Py_None, *result;
    Py_ssize_t offsets[2], i, n;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "branch_scan takes 4 arguments");
        return NULL;
    }
    ids = args[0];
    by_id = args[1];
    standin = args[3];
    if (!PyList_CheckExact(ids) || !(PyDict_CheckExact(by_id) ||
                                     (PyList_CheckExact(by_id) && PyList_GET_SIZE(by_id) == PyList_GET_SIZE(ids)))) {
        PyErr_SetString(PyExc_TypeError, "branch_scan: a list of ids and a dict (or a list as long)");
        return NULL;
    }
    if (slot_layout(args[2], fields, 2, offsets) < 0)
        return NULL;
    numbers = PyDict_New();
    if (numbers == NULL)
        return NULL;
    Py_INCREF(last);
    n = PyList_GET_SIZE(ids);
    for (i = 0; i < n; i++) {
        PyObject *eid = PyList_GET_ITEM(ids, i), *entry, *kind, *message, *role;
        int r;
        entry = PyList_CheckExact(by_id) ? PyList_GET_ITEM(by_id, i)
                                         : PyDict_GetItemWithError(by_id, eid);  /* (None is a key too: `by_id.get(None)`) */
        if (entry == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        if ((PyObject *)Py_TYPE(entry) != args[2])
            goto hand_back;
        kind = *(PyObject **)((char *)entry + offsets[0]);
        if (kind == NULL)
            goto hand_back;
        if (str_is(kind, s_message)) {
            r = PyObject_IsTrue(eid);
            if (r < 0)
                goto fail;
            if (!r)
                continue;
            r = entry_message(*(PyObject **)((char *)entry + offsets[1]), standin, &message);
            if (r == -2)
                goto hand_back;
            if (r < 0)
                goto fail;
            if (message == NULL)
                continue;
            if (!PyDict_CheckExact(message) && (PyObject *)Py_TYPE(message) != standin)
                goto hand_back;
            role = PyDict_GetItemWithError(message, key_str[K_ROLE]);
            if (role == NULL && PyErr_Occurred())
                goto fail;
            if (role != NULL && !PyUnicode_CheckExact(role) && PyUnicode_Check(role))
                goto hand_back;  /* (a str subclass: its own ==) */
            if (str_is(role, s_user)) {
                PyObject *number = PyLong_FromSsize_t(PyDict_GET_SIZE(numbers) + 1);
                if (number == NULL || PyDict_SetItem(numbers, eid, number) < 0) {
                    Py_XDECREF(number);
                    goto fail;
                }
                Py_DECREF(number);
            }
        } else if (str_is(kind, s_compaction)) {
            Py_SETREF(last, PyLong_FromSsize_t(i));
            if (last == NULL)
                goto fail;
        }
    }
    result = PyTuple_Pack(2, last, numbers);
    Py_DECREF(last);
    Py_DECREF(numbers);
    return result;
hand_back:
    Py_DECREF(last);
    Py_DECREF(numbers);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(last);
    Py_DECREF(numbers);
    return NULL;
}

/* `role_counts(messages, standin)`: (any message with role "system", the messages with role
 * "user") for a list of exact dicts and stand-ins (`live._full_facts`), else None. */
static PyObject *py_role_counts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *messages;
    Py_ssize_t i, n, users = 0;
    int system = 0;
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "role_counts(messages, standin): a list of messages");
        return NULL;
    }
    messages = args[0];
    n = PyList_GET_SIZE(messages);
    for (i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *role;
        if (!PyDict_CheckExact(message) && (PyObject *)Py_TYPE(message) != args[1])
            Py_RETURN_NONE;
        if (role_of(message, &role) < 0)
            return NULL;
        if (role == NULL || !PyUnicode_CheckExact(role)) {
            if (role != NULL && role != Py_None && PyUnicode_Check(role))
                Py_RETURN_NONE;  /* (a str subclass: its own ==) */
            continue;
        }
        users += str_is(role, s_user);
        system |= str_is(role, s_system);
    }
    return Py_BuildValue("(Nn)", PyBool_FromLong(system), users);
}

/* `tool_pairing(messages, open_calls)`: the positions of the tool results that
 * `context._tool_pairing_warnings(messages, ids, open_calls)` warns about (it makes the
 * warnings), for a list of exact dicts and stand-ins, else None. `open_calls`: None or a set. */
static PyObject *py_tool_pairing(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *messages, *open_calls = NULL, *maker = NULL, *found = NULL;
    Py_ssize_t i, n;
    if (nargs != 3 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "tool_pairing(messages, open_calls, standin)");
        return NULL;
    }
    messages = args[0];
    n = PyList_GET_SIZE(messages);
    for (i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i);
        if (!PyDict_CheckExact(message) && (PyObject *)Py_TYPE(message) != args[2])
            Py_RETURN_NONE;
    }
    open_calls = args[1] == Py_None ? PySet_New(NULL) : Py_NewRef(args[1]);
    found = PyList_New(0);
    if (open_calls == NULL || found == NULL)
        goto fail;
    for (i = 0; i < n; i++) {
        PyObject *message = PyList_GET_ITEM(messages, i), *role;
        int r;
        if (role_of(message, &role) < 0)
            goto fail;
        if (role != NULL && !PyUnicode_CheckExact(role) && PyUnicode_Check(role)) {
            Py_CLEAR(open_calls);
            Py_DECREF(found);
            Py_RETURN_NONE;  /* (a str subclass: its own ==) */
        }
        if (str_is(role, s_toolResult)) {
            PyObject *call;
            if (maker != NULL) {  /* `_call_ids(maker)` */
                PyObject *calls = PySet_New(NULL), *content;
                if (calls == NULL)
                    goto fail;
                content = get(maker, K_CONTENT);
                if (content == NULL && PyErr_Occurred()) {
                    Py_DECREF(calls);
                    goto fail;
                }
                if (content != NULL && PyList_Check(content)) {
                    Py_ssize_t k;
                    for (k = 0; k < PyList_GET_SIZE(content); k++) {
                        PyObject *block = PyList_GET_ITEM(content, k), *id;
                        int error = 0;
                        if (!PyDict_Check(block))
                            continue;
                        if (!PyDict_CheckExact(block)) {  /* (its own `get`) */
                            Py_DECREF(calls);
                            Py_CLEAR(open_calls);
                            Py_DECREF(found);
                            Py_CLEAR(maker);
                            Py_RETURN_NONE;
                        }
                        if (!block_type_is(block, s_toolCall, &error)) {
                            if (error) {
                                Py_DECREF(calls);
                                goto fail;
                            }
                            continue;
                        }
                        id = get(block, K_ID);
                        if ((id == NULL && PyErr_Occurred()) || PySet_Add(calls, id ? id : Py_None) < 0) {
                            Py_DECREF(calls);
                            goto fail;
                        }
                    }
                }
                Py_SETREF(open_calls, calls);
                Py_CLEAR(maker);
            }
            call = get(message, K_TOOLCALLID);
            if (call == NULL && PyErr_Occurred())
                goto fail;
            r = PySet_Contains(open_calls, call ? call : Py_None);
            if (r < 0)
                goto fail;
            if (!r) {
                PyObject *index = PyLong_FromSsize_t(i);
                if (index == NULL || PyList_Append(found, index) < 0) {
                    Py_XDECREF(index);
                    goto fail;
                }
                Py_DECREF(index);
            }
            continue;
        }
        if (str_is(role, s_assistant)) {
            Py_XSETREF(maker, Py_NewRef(message));
        } else {
            Py_CLEAR(maker);
            Py_SETREF(open_calls, Py_NewRef(no_calls));
        }
    }
    Py_XDECREF(open_calls);
    Py_XDECREF(maker);
    return found;
fail:
    Py_XDECREF(open_calls);
    Py_XDECREF(maker);
    Py_XDECREF(found);
    return NULL;
}

static PyMethodDef module_methods[] = {
    {"bytes_depth", py_bytes_depth, METH_VARARGS,
     "`limits._bytes_depth(raw, limit)` in one pass: the depth of [/{ outside strings, stopped past limit."},
    {"attribute", (PyCFunction)(void (*)(void))py_attribute, METH_FASTCALL,
     "attribute(messages, entry_ids, count, counted_name, in_llm_context, segment, standin) -> "
     "(totals, children, segments, message_tokens, total)."},
    {"turns", (PyCFunction)(void (*)(void))py_turns, METH_FASTCALL,
     "turns(messages, entry_ids, tokens, turn_numbers, turn_type, zone_of, preview, standin) -> tuple or None."},
    {"turn_rows", (PyCFunction)(void (*)(void))py_turn_rows, METH_FASTCALL,
     "turn_rows(turns, turn_type) -> list of dicts: the turns of `map --json`."},
    {"local_time", (PyCFunction)(void (*)(void))py_local_time, METH_FASTCALL,
     "local_time(ms, zone_of) -> datetime or None: `live._local_time(ms)`."},
    {"set_cl100k_ranks", (PyCFunction)py_set_cl100k_ranks, METH_O,
     "set_cl100k_ranks(ranks): load cl100k's merge ranks ({bytes: rank}) for bpe_count and the preparers (None: unload)."},
    {"use_cl100k", (PyCFunction)py_use_cl100k, METH_O,
     "use_cl100k(encoding) -> bool: load its merge ranks for bpe_count when its pattern is cl100k's."},
    {"bpe_count", (PyCFunction)(void (*)(void))py_bpe_count, METH_FASTCALL,
     "bpe_count(text, encode=None) -> int or None: len(cl100k.encode_ordinary(text)), its ASCII lines counted "
     "here and the others by encode (None: not counted here)."},
    {"context_messages", (PyCFunction)(void (*)(void))py_context_messages, METH_FASTCALL,
     "context_messages(selected, compaction, entry_type, standin, other) -> (messages, entry ids)."},
    {"linear_path", (PyCFunction)(void (*)(void))py_linear_path, METH_FASTCALL,
     "linear_path(entries, by_id, entry_type) -> list or None: the branch of a session that is one chain."},
    {"branch_scan", (PyCFunction)(void (*)(void))py_branch_scan, METH_FASTCALL,
     "branch_scan(branch_entry_ids, by_id, entry_type, standin) -> (last compaction, turn numbers) or None."},
    {"role_counts", (PyCFunction)(void (*)(void))py_role_counts, METH_FASTCALL,
     "role_counts(messages, standin) -> (any system message, user messages) or None."},
    {"tool_pairing", (PyCFunction)(void (*)(void))py_tool_pairing, METH_FASTCALL,
     "tool_pairing(messages, open_calls, standin) -> positions of unpaired tool results, or None."},
    {"blake2b_16", py_blake2b_16, METH_O, "16-byte BLAKE2b digest of a bytes-like object (tests)."},
    {"js_stringify_plain", py_js_stringify_plain, METH_O,
     "`js_stringify(value)` by the C writer, or None where the Python function is needed (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_cprep",
    "`SlimReader._prepare` for the common line, in C (see `ds4sessions.agents.pi.slim`).", -1, module_methods,
};

/* The constants and field lists the rules above are written for, as the Python modules spell
 * them: `slim.c_preparer` compares them with the Python values and does not use this module when
 * one differs (a rule changed in Python and not here). Keep in step with the switches above. */
static PyObject *rules(void)
{
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:L,s:d,"
        "s:(ssssssssssss),s:(sssss),s:(ssssss),s:(sssss),s:(sssss),s:(sss),s:(sssss),s:(ssssss),s:(sssssss)}",
        "PREVIEW_KEPT", PREVIEW_KEPT, "CL100K_CHUNK_CHARS", CL100K_CHUNK_CHARS,
        "CL100K_MESSAGE_OVERHEAD", CL100K_MESSAGE_OVERHEAD, "MESSAGE_WRAPPER_TOKENS", MESSAGE_WRAPPER_TOKENS,
        "CONTENT_BLOCK_WRAPPER_TOKENS", CONTENT_BLOCK_WRAPPER_TOKENS, "MAX_SAFE", MAX_SAFE_I, "MAX_DATE_MS", MAX_DATE_MS_F,
        "STR_FIELDS_MESSAGE", "role", "provider", "model", "api", "stopReason", "errorMessage", "toolCallId", "toolName",
        "command", "output", "customType", "fullOutputPath",
        "STR_FIELDS_BLOCK", "type", "id", "name", "mimeType", "data",
        "USAGE_FIELDS", "input", "output", "cacheRead", "cacheWrite", "totalTokens", "cacheWrite1h",
        "COST_FIELDS", "input", "output", "cacheRead", "cacheWrite", "total",
        "MESSAGE_CHECKS_OTHER", "summary", "content", "usage", "timestamp", "exitCode",
        "BLOCK_CHECKED_OTHER", "text", "thinking", "arguments",
        "PLAIN_MESSAGE_KEYS", "type", "id", "parentId", "timestamp", "message",
        "SHARED_VALUES", "role", "provider", "model", "api", "stopReason", "toolName",
        "CONTEXT_ROLES", "system", "user", "assistant", "toolResult", "custom", "branchSummary", "compactionSummary");
}

static PyObject *intern(const char *s)
{
    return PyUnicode_InternFromString(s);
}

PyMODINIT_FUNC PyInit__cprep(void)
{
    PyObject *module;
    int i;
    static const char *roles[] = {"system", "user", "assistant", "toolResult", "custom", "branchSummary",
                                  "compactionSummary"};
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    key_codes = PyDict_New();
    if (key_codes == NULL)
        return NULL;
    for (i = 1; i < K_COUNT; i++) {
        PyObject *code;
        key_str[i] = intern(key_names[i]);
        code = PyLong_FromLong(i);
        if (key_str[i] == NULL || code == NULL || PyDict_SetItem(key_codes, key_str[i], code) < 0)
            return NULL;
        Py_DECREF(code);
    }
    if (!(s_message = intern("message")) || !(s_details = intern("details")) || !(s_isError = intern("isError")) ||
        !(s_user = intern("user")) || !(s_assistant = intern("assistant")) || !(s_toolResult = intern("toolResult")) ||
        !(s_toolCall = intern("toolCall")) || !(s_image = intern("image")) ||
        !(s_bashExecution = intern("bashExecution")) || !(s_excludeFromContext = intern("excludeFromContext")) ||
        !(s_counted = intern("counted")) || !(s_encodes = intern("encodes")) ||
        !(s_assistant_text = intern("assistant_text")) || !(s_tool_calls = intern("tool_calls")) ||
        !(s_tool_results = intern("tool_results")) || !(s_other = intern("other")) || !(s_question = intern("?")) ||
        !(s_empty = PyUnicode_New(0, 0)) || !(s_image_preview = intern("[image]")) ||
        !(s_encode_ordinary = intern("encode_ordinary")) || !(s_encoding = intern("_encoding")) ||
        !(s_text_method = intern("text")))
        return NULL;
    one = PyLong_FromLong(1);
    zero = PyLong_FromLong(0);
    no_calls = PyFrozenSet_New(NULL);
    s_compaction = intern("compaction");
    s_system = intern("system");
    if (one == NULL || zero == NULL || no_calls == NULL || s_compaction == NULL || s_system == NULL)
        return NULL;
    if (!(s_entries = intern("entries")) || !(s_by_id = intern("by_id")) || !(s_diagnostics = intern("diagnostics")) ||
        !(s_missing_parents = intern("missing_parents")) || !(s_leaf_id = intern("leaf_id")) ||
        !(s_last_line_no = intern("last_line_no")) || !(s_end_offset = intern("end_offset")))
        return NULL;
    context_roles = PySet_New(NULL);
    if (context_roles == NULL)
        return NULL;
    for (i = 0; i < (int)(sizeof roles / sizeof roles[0]); i++) {
        PyObject *role = intern(roles[i]);
        if (role == NULL || PySet_Add(context_roles, role) < 0)
            return NULL;
        Py_DECREF(role);
    }
    if (PyType_Ready(&PreparerType) < 0)
        return NULL;
    module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    {
        PyObject *table = rules();
        if (table == NULL || PyModule_AddObject(module, "RULES", table) < 0) {
            Py_XDECREF(table);
            Py_DECREF(module);
            return NULL;
        }
    }
    Py_INCREF(&PreparerType);
    if (PyModule_AddObject(module, "Preparer", (PyObject *)&PreparerType) < 0) {
        Py_DECREF(&PreparerType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
