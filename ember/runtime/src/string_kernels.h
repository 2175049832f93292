/*
 * ember C runtime: the element functions of the string ops (docs/strings.md). Included by
 * runtime.c; generated kernels call them per element through call_extern, and the strings
 * they make come from the current string arena (string_arena.h).
 */
#include <regex.h>

EMBER_DLL uint8_t ember_str_equal(EmberString a, EmberString b) {
  if (a.size != b.size) return 0;
  return a.size == 0 || memcmp(a.data, b.data, (size_t)a.size) == 0;
}

/* a copy of `size` bytes at `data` (NUL-terminated) in the current arena */
static EmberString string_make(const char* data, int64_t size) {
  EmberString out = {"", 0};
  char* bytes = EmberBackendStringAlloc(size + 1);
  if (bytes == NULL) return out; /* the error is set; the executor reports it */
  if (size > 0) memcpy(bytes, data, (size_t)size);
  bytes[size] = '\0';
  out.data = bytes;
  out.size = size;
  return out;
}

EMBER_DLL EmberString ember_str_concat(EmberString a, EmberString b) {
  EmberString out = {"", 0};
  char* bytes = EmberBackendStringAlloc(a.size + b.size + 1);
  if (bytes == NULL) return out;
  if (a.size > 0) memcpy(bytes, a.data, (size_t)a.size);
  if (b.size > 0) memcpy(bytes + a.size, b.data, (size_t)b.size);
  bytes[a.size + b.size] = '\0';
  out.data = bytes;
  out.size = a.size + b.size;
  return out;
}

/* compiled patterns, one small cache per thread (patterns are string literals of kernels) */
#define EMBER_REGEX_CACHE 8
typedef struct {
  char* pattern; /* a copy: the kernel's literal goes away with its library */
  regex_t re;
  int ok;
} EmberRegexSlot;
static _Thread_local EmberRegexSlot g_regex_cache[EMBER_REGEX_CACHE];
static _Thread_local int g_regex_next = 0;

static EmberRegexSlot* regex_get(const char* pattern) {
  for (int i = 0; i < EMBER_REGEX_CACHE; ++i) {
    EmberRegexSlot* slot = &g_regex_cache[i];
    if (slot->pattern != NULL && strcmp(slot->pattern, pattern) == 0) return slot;
  }
  EmberRegexSlot* slot = &g_regex_cache[g_regex_next];
  g_regex_next = (g_regex_next + 1) % EMBER_REGEX_CACHE;
  if (slot->pattern != NULL && slot->ok) regfree(&slot->re);
  free(slot->pattern);
  slot->pattern = strdup(pattern);
  slot->ok = slot->pattern != NULL && regcomp(&slot->re, pattern, REG_EXTENDED) == 0;
  if (!slot->ok) set_error("RegexFullMatch: the pattern '%s' does not compile", pattern);
  return slot;
}

/* whether the whole of `s` matches the POSIX extended `pattern` (leftmost-longest matching
   finds a whole-string match when there is one) */
EMBER_DLL uint8_t ember_str_regex_full_match(EmberString s, const char* pattern) {
  EmberRegexSlot* slot = regex_get(pattern);
  if (!slot->ok || s.data == NULL) return 0;
  regmatch_t match[1];
  if (regexec(&slot->re, s.data, 1, match, 0) != 0) return 0;
  return match[0].rm_so == 0 && (int64_t)match[0].rm_eo == s.size;
}

/* ---- case change (StringNormalizer): UTF-8 decoded by hand, code points mapped with the
   C library's towlower_l/towupper_l in the C.UTF-8 locale (ASCII only if it is missing) */
#include <locale.h>
#include <wctype.h>

static locale_t g_utf8_locale = (locale_t)0;
static pthread_once_t g_utf8_once = PTHREAD_ONCE_INIT;
static void utf8_locale_init(void) { g_utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

/* the code point at s[*i] (advancing *i), or -1 for a byte that starts no valid sequence */
static int32_t utf8_next(const unsigned char* s, int64_t n, int64_t* i) {
  unsigned char c = s[*i];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > n) { *i += 1; return -1; }
  int32_t cp = len == 1 ? c : c & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    if ((s[*i + k] & 0xc0) != 0x80) { *i += 1; return -1; }
    cp = (cp << 6) | (s[*i + k] & 0x3f);
  }
  *i += len;
  return cp;
}

static int utf8_put(int32_t cp, char* out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* `s` lower-cased (upper = 0) or upper-cased (upper = 1) */
EMBER_DLL EmberString ember_str_change_case(EmberString s, int32_t upper) {
  EmberString out = {"", 0};
  pthread_once(&g_utf8_once, utf8_locale_init);
  char* bytes = EmberBackendStringAlloc(s.size * 4 + 1);
  if (bytes == NULL) return out;
  const unsigned char* src = (const unsigned char*)s.data;
  int64_t i = 0, o = 0;
  while (i < s.size) {
    int64_t at = i;
    int32_t cp = utf8_next(src, s.size, &i);
    if (cp < 0) { bytes[o++] = (char)src[at]; continue; }
    if (g_utf8_locale != (locale_t)0) {
      cp = (int32_t)(upper ? towupper_l((wint_t)cp, g_utf8_locale) : towlower_l((wint_t)cp, g_utf8_locale));
    } else if (cp < 0x80) {
      cp = upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    }
    o += utf8_put(cp, bytes + o);
  }
  bytes[o] = '\0';
  out.data = bytes;
  out.size = o;
  return out;
}

/* ---- LabelEncoder with string keys: `keys` sorted by their bytes (memcmp, shorter first on a
   common prefix), `values` has one more element than keys (the default, last), each
   `value_bytes` wide; out[i] = values[index of x[i] in keys, else the default] */
static int string_compare(EmberString a, EmberString b) {
  int64_t n = a.size < b.size ? a.size : b.size;
  int c = n > 0 ? memcmp(a.data, b.data, (size_t)n) : 0;
  if (c != 0) return c;
  return a.size < b.size ? -1 : a.size > b.size ? 1 : 0;
}

EMBER_DLL int32_t ember_str_label_encode(const EmberString* x, int64_t n, const EmberString* keys,
                               int64_t n_keys, const void* values, int64_t value_bytes,
                               void* out) {
  const char* vals = (const char*)values;
  char* dst = (char*)out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t lo = 0, hi = n_keys, found = n_keys; /* the default */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      int c = string_compare(x[i], keys[mid]);
      if (c == 0) { found = mid; break; }
      if (c < 0) hi = mid; else lo = mid + 1;
    }
    memcpy(dst + i * value_bytes, vals + found * value_bytes, (size_t)value_bytes);
  }
  return 0;
}
