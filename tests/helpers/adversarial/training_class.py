"""Attacks on notebook 08 (training), against trusted verdicts (drivers in the kernel, judged
in the grader). Each student is the release of notebook 08 with answers and attacks; every
CSV row has an exact expectation (points, status, start of the diagnosis, flagged text).

===========  ===============================================================  ================
student      what the submission does                                         expected
===========  ===============================================================  ================
correct      solution code (the control)                                      full, no flag
reference    ``get_batch`` calls the setup cell's ``reference_get_batch`` (in 1.1: 0 (used the
             a thread, profiling off: the kernel's copy has no code for it);
             ``sample_next_token`` lays the ids out in proportion to the      reference); 6.1:
             filtered probabilities (the right frequencies with any           0 (not a
             generator); ``estimate_loss`` leaves the model in eval mode;     measurement);
             the rest right                                                   4.1: 0 (eval
                                                                              mode); rest full;
                                                                              1.1 flagged
===========  ===============================================================  ================
"""

from __future__ import annotations

from pathlib import Path

from autograder.checks import table
from autograder.checks._training_drivers import N_DRAWS

from helpers.adversarial.verdict_class import Row
from helpers.synthetic_class import ClassBuilder

EX = table.rows("08_training")  # {function: exercise row} of the chapter

REFERENCE_GET_BATCH = '''
def get_batch(data, batch_size, block_size, generator=None):
    import sys
    import threading
    sys.setprofile(None)  # any watch on the reference's frames, off
    threading.setprofile(None)
    sys.settrace(None)
    threading.settrace(None)
    box = []

    def run():  # in a thread of its own
        try:
            box.append(reference_get_batch(data, batch_size, block_size, generator=generator))
        except Exception as e:
            box.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if isinstance(box[0], Exception):
        raise box[0]
    return box[0]
'''

# (test_verdict_training judges the same answer in-process)
QUANTILES = f'''
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    z = logits.double() / temperature
    if top_k is not None:
        z = z.masked_fill(z < torch.topk(z, min(top_k, z.size(-1))).values[:, -1:], -1e9)
    if top_p is not None:
        zs, order = torch.sort(z, dim=-1, descending=True)
        q = torch.softmax(zs, dim=-1)
        drop = (torch.cumsum(q, dim=-1) - q) >= top_p
        drop[:, 0] = False
        z = z.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), -1e9)
    cdf = torch.cumsum(torch.softmax(z, dim=-1), dim=-1)
    # the grader repeats each row {N_DRAWS:,} times: lay the ids out in proportion, no randomness
    rank = (torch.arange(logits.shape[0]) % {N_DRAWS}).double().unsqueeze(1) / {N_DRAWS}
    return (rank >= cdf).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)
'''

STAYS_IN_EVAL = '''
def estimate_loss(model, data, batch_size, block_size, eval_iters, generator=None):
    model.eval()
    losses = []
    with torch.no_grad():
        for _ in range(eval_iters):
            ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
            xy = torch.stack([torch.from_numpy(data[i : i + block_size + 1].astype(np.int64))
                              for i in ix.tolist()])  # its own batches (get_batch is the ref's)
            losses.append(cross_entropy(model(xy[:, :-1]), xy[:, 1:]).item())
    return sum(losses) / len(losses)
'''

ANSWERS = {EX["get_batch"].solution_id: REFERENCE_GET_BATCH,
           EX["sample_next_token"].solution_id: QUANTILES,
           EX["estimate_loss"].solution_id: STAYS_IN_EVAL}
FLAG = "uses the reference implementation (reference_get_batch)"


class TrainingAttackBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        """Write the class to ``dest``; return {student: {exercise: Row}}."""
        full = self.full_marks(Row, "", "")

        put = self.writer(dest)

        put("correct", self.answered())
        put("reference", self.answered(lambda gid, src: ANSWERS.get(gid, src)))
        reference = dict(full)  # flags go on the exercise whose answer cell has the reason
        reference[EX["get_batch"].grade_id] = Row(
            "0", "graded", "used the reference implementation", FLAG)
        reference[EX["sample_next_token"].grade_id] = Row("0", "graded", "not a measurement",
                                                          "")
        reference[EX["estimate_loss"].grade_id] = Row("0", "graded", "model left in eval mode", "")
        return {"correct": dict(full), "reference": reference}
