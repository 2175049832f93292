/*
 * ember C runtime: the string arena (docs/strings.md). Included by runtime.c.
 *
 * A `string` tensor element is an EmberString {data, size}. The bytes of a string a kernel
 * makes (StringConcat, ...) come from the arena the executor made current on this thread for
 * the run (EmberStringArenaSwap); the executor resets its arena at the start of each run, so
 * a run's strings live until the next run of the same executor and memory does not grow over
 * many runs (the first chunk is kept and reused).
 */
#define EMBER_STRING_CHUNK ((size_t)64 * 1024)

typedef struct EmberStringChunk {
  struct EmberStringChunk* next;
  size_t cap;
  size_t used;
  char data[];
} EmberStringChunk;

struct EmberStringArena {
  EmberStringChunk* head; /* the chunk being filled; older chunks follow */
  int64_t bytes;          /* bytes held in chunks, for tests and reports */
};

static _Thread_local EmberStringArena* g_string_arena = NULL;

EmberStringArena* EmberStringArenaCreate(void) {
  EmberStringArena* arena = (EmberStringArena*)calloc(1, sizeof(EmberStringArena));
  if (arena == NULL) set_error("EmberStringArenaCreate: out of memory (%s)", "calloc failed");
  return arena;
}

void EmberStringArenaReset(EmberStringArena* arena) {
  if (arena == NULL || arena->head == NULL) return;
  /* keep the oldest chunk (the tail) for reuse, free the rest */
  EmberStringChunk* chunk = arena->head;
  while (chunk->next != NULL) {
    EmberStringChunk* next = chunk->next;
    free(chunk);
    chunk = next;
  }
  chunk->used = 0;
  arena->head = chunk;
  arena->bytes = (int64_t)chunk->cap;
}

void EmberStringArenaFree(EmberStringArena* arena) {
  if (arena == NULL) return;
  EmberStringChunk* chunk = arena->head;
  while (chunk != NULL) {
    EmberStringChunk* next = chunk->next;
    free(chunk);
    chunk = next;
  }
  if (g_string_arena == arena) g_string_arena = NULL;
  free(arena);
}

EmberStringArena* EmberStringArenaSwap(EmberStringArena* arena) {
  EmberStringArena* previous = g_string_arena;
  g_string_arena = arena;
  return previous;
}

int64_t EmberStringArenaBytes(EmberStringArena* arena) { return arena == NULL ? 0 : arena->bytes; }

char* EmberBackendStringAlloc(int64_t nbytes) {
  EmberStringArena* arena = g_string_arena;
  if (arena == NULL) {
    set_error("EmberBackendStringAlloc: %s", "no string arena is current on this thread; run "
              "string kernels through ember's graph or AOT executor");
    return NULL;
  }
  size_t need = (size_t)(nbytes < 0 ? 0 : nbytes);
  need = (need + 15) & ~(size_t)15;
  EmberStringChunk* head = arena->head;
  if (head == NULL || head->cap - head->used < need) {
    size_t cap = need > EMBER_STRING_CHUNK ? need : EMBER_STRING_CHUNK;
    EmberStringChunk* chunk = (EmberStringChunk*)malloc(sizeof(EmberStringChunk) + cap);
    if (chunk == NULL) {
      set_error("EmberBackendStringAlloc: out of memory (%s)", "malloc failed");
      return NULL;
    }
    chunk->next = head;
    chunk->cap = cap;
    chunk->used = 0;
    arena->head = chunk;
    arena->bytes += (int64_t)cap;
    head = chunk;
  }
  char* out = head->data + head->used;
  head->used += need;
  return out;
}
