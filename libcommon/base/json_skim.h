/* json_skim.h: a quick look at one JSON object (a JSON Lines record)
 * without building it: its top-level members as spans of the text, the
 * whole text checked as jansson's parser checks it (json_loadb with
 * JSON_ALLOW_NUL).
 *
 * A program that reads a field or two of large records (rl-reward reads
 * the completion of rollouts that carry hundreds of token ids and
 * log-probs) spends most of its time in jansson building numbers it never
 * looks at.  The skimmer accepts only text that it is sure jansson accepts
 * with the same meaning and declines the rest: any error, a top level that
 * is not an object, integers of more than 18 digits and reals whose
 * magnitude could overflow (jansson refuses those), \u escapes of
 * surrogates (jansson checks their pairing), keys with escapes, nesting
 * deeper than JSON_SKIM_DEPTH.  A caller that gives declined text to
 * jansson therefore behaves as with jansson alone, messages included. */
#ifndef LMPIPE_JSON_SKIM_H
#define LMPIPE_JSON_SKIM_H

#include <stddef.h>

#include "base/err.h"

enum { JSON_SKIM_DEPTH = 64 };

typedef struct json_member {
	size_t key, key_len;  /* the key's bytes (it has no escapes) at text + key */
	size_t val, val_len;  /* the value's JSON text at text + val */
	size_t items;         /* an array value: its elements (else 0) */
} json_member;

typedef struct json_skim {
	json_member *m;       /* [n]: the members in text order, repeated keys too */
	size_t n, cap;
} json_skim;

void json_skim_free(json_skim *s);

/* Skim text[0..len): 1 with s->m[0..n) the object's members, 0 when
 * declined (s->n is then meaningless), -1 out of memory (message in e). */
int json_skim_object(const char *text, size_t len, json_skim *s, lm_err *e);

/* The member named key as jansson would keep it (the last of repeated
 * keys), or NULL. */
const json_member *json_skim_get(const json_skim *s, const char *text, const char *key);

/* A string value that json_skim_object accepted (its text, quotes
 * included) decoded as jansson decodes it: *out (malloc'd, NUL-terminated,
 * the caller's) holds *n bytes, which may include NUL bytes ("\u0000").
 * 0, or -1 out of memory. */
int json_skim_string(const char *val, size_t len, char **out, size_t *n, lm_err *e);

/* The elements of an array value that json_skim_object accepted (its
 * text, brackets included), one a call: *at starts at 0; 1 with the next
 * element's text at val + *el, *el_len bytes, or 0 after the last. */
int json_skim_item(const char *val, size_t len, size_t *at, size_t *el, size_t *el_len);

/* A value that json_skim_object accepted, written as jansson writes it
 * alone (json_dumps with JSON_COMPACT | JSON_ENCODE_ANY; an integer is its
 * own text unless it is -0): malloc'd, the caller's, NULL out of memory. */
char *json_skim_dump(const char *val, size_t len);

#endif
