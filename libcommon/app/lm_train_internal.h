/* lm_train_internal.h: the parts of lm-train's driver besides the training
 * loop: the checkpoint directory (lm_train_dir.c) and the hyper-parameters
 * a checkpoint records and --resume restores (lm_train_hparams.c). */
#ifndef LMPIPE_LM_TRAIN_INTERNAL_H
#define LMPIPE_LM_TRAIN_INTERNAL_H

#include "app/lm_train.h"
#include "base/atomic.h"
#include "data/shard_reader.h"
#include "tok/bpe_identity.h"

/* What train_dir_prepare() did, so that a run that fails before its first
 * checkpoint can undo it. */
typedef struct train_dir {
	const char *path;
	size_t created_from;  /* length of the part of path that existed; 0: none created */
	int created;          /* 1: the directory (and maybe parents) was made here */
	int stale_removed;    /* hidden temporary files of a killed run, removed */
} train_dir;

/* Make DIR (with its parents) or check that it is a directory; remove the
 * hidden temporaries a killed run left; refuse a directory that holds
 * checkpoints unless resume or force. */
int train_dir_prepare(train_dir *d, const char *path, int resume, int force, lm_err *e);
/* Remove what train_dir_prepare created, if it is still empty. */
void train_dir_forget(const train_dir *d);
/* The checkpoint to resume from: DIR/latest, else the newest
 * DIR/step-N.safetensors (*fallback set to 1).  Malloc'd path in *path. */
int train_dir_resume_path(const char *dir, char **path, int *fallback, lm_err *e);
/* Keep the newest keep step files of DIR (never the one latest names). */
int train_dir_prune(const char *dir, long long keep, lm_err *e);

/* The run's hyper-parameters as a JSON object (malloc'd text), stored in
 * every checkpoint under the metadata key TRAIN_META_KEY. */
#define TRAIN_META_KEY "lmpipe.train"
char *train_hparams_json(const train_config *c);
/* Take the hyper-parameters stored in a checkpoint (json: NULL for a
 * checkpoint that has none) for every option the command line did not
 * give; for each one it gave with another value, say so through c->note.
 * The seed cannot change.  A --tokens budget is counted in steps of the
 * merged batch shape. */
int train_hparams_resume(train_config *c, const char *json, const char *ckpt, lm_err *e);
/* The tokenizer identity the checkpoints record (TOKENIZER_META_KEY,
 * tok/bpe_identity.h), malloc'd into *json: that of c->tokenizer, checked
 * against the shards (their vocabulary and, when they name it, their
 * tokenizer) and, on resume, against the identity the checkpoint recorded;
 * else the recorded one, checked against the shards'; else what the shards
 * tell (vocabulary size, end-of-text id, the tokenizer they name).  val
 * (NULL: none) must not name another tokenizer than data. */
#define TOKENIZER_META_KEY BPE_IDENTITY_KEY
int train_tokenizer_record(const train_config *c, const shard_reader *data, const shard_reader *val,
			   const char *resume_ckpt, char **json, lm_err *e);
/* Data parallel (lm_train_dist.c): the world from the launcher's
 * environment (c->world, c->rank), the GPU of the local rank, the backend
 * and the communicator of the run. */
struct lm_comm;
int train_dist_open(train_config *c, struct lm_comm **comm, lm_backend **be, lm_err *e);
/* Every rank's configuration (hyper-parameters, model, data, ZeRO) the
 * same as rank 0's, or a usage error naming the rank that differs. */
int train_dist_check(struct lm_comm *comm, const train_config *c, const model_config *mc,
		     const char *hparams, lm_err *e);
/* The memory line printed at start (rank 0, through c->note). */
struct ddp;
void train_dist_memory(const train_config *c, const struct ddp *d);

/* --dump-windows (lm_train_windows.c): the header (shape, the shards of
 * data and val, which may be NULL), one line per optimizer step (the
 * offsets of its n windows from first on), and the file committed whole
 * at the end or removed. */
typedef struct train_windows {
	atomic_file af;
	int on;
} train_windows;
int train_windows_open(train_windows *w, const char *path, const shard_reader *data,
		       const shard_reader *val, int B, int T, int accum, lm_err *e);
int train_windows_step(train_windows *w, long long step, const shard_reader *data,
		       uint64_t first, uint64_t n, lm_err *e);
int train_windows_commit(train_windows *w, lm_err *e);
void train_windows_abort(train_windows *w);

/* Evaluation (lm_train_eval.c): inputs and targets of the rows windows
 * from sequential window k0 on (win: rows x (T + 1) ids); with a stride
 * below T, a window that is not its shard's first keeps only its last
 * stride targets (the others are -1: not scored), which the windows
 * before it did not reach. */
void train_eval_targets(const shard_reader *r, uint64_t k0, const uint32_t *win, int rows, int T,
			int stride, int32_t *ids, int32_t *tgt);

/* Print a note through c->note (when set). */
void train_note(const train_config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
