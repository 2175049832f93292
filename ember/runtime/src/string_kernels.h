/*
 * ember C runtime: the element functions of the string ops (docs/strings.md). Included by
 * runtime.c; generated kernels call them per element through call_extern, and the strings
 * they make come from the current string arena (string_arena.h).
 */
#include <regex.h>

uint8_t ember_str_equal(EmberString a, EmberString b) {
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

EmberString ember_str_concat(EmberString a, EmberString b) {
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
  const char* pattern;
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
  slot->pattern = pattern;
  slot->ok = regcomp(&slot->re, pattern, REG_EXTENDED) == 0;
  if (!slot->ok) set_error("RegexFullMatch: the pattern '%s' does not compile", pattern);
  return slot;
}

/* whether the whole of `s` matches the POSIX extended `pattern` (leftmost-longest matching
   finds a whole-string match when there is one) */
uint8_t ember_str_regex_full_match(EmberString s, const char* pattern) {
  EmberRegexSlot* slot = regex_get(pattern);
  if (!slot->ok || s.data == NULL) return 0;
  regmatch_t match[1];
  if (regexec(&slot->re, s.data, 1, match, 0) != 0) return 0;
  return match[0].rm_so == 0 && (int64_t)match[0].rm_eo == s.size;
}
