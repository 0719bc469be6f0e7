"""Issue 13, third session: the sloppy-teacher warm start, explored outside the package.

    python bench/warm_start_sloppy.py --steps 600 --bs 128 --chat 0.4 --cosine 0 [--save DIR]

Pre-trains the random tiny model on facts for all 243 `a op b` and, in `--chat` of the steps, worked examples for
the 179 train questions from a teacher who adds instead of the asked operation in `--p_add` of them; prints
greedy accuracy, format, per-sample accuracy and pass@8 on the held-out and train questions, and plain-fact recall
on the held-out facts. The shipped version is grpo_sweep/models/warm.py (BENCHMARKS.md has the rows).
"""
import argparse, json, random, time, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=800)
p.add_argument("--chat", type=float, default=0.4)
p.add_argument("--p_add", type=float, default=0.6)
p.add_argument("--lr", type=float, default=6e-3)
p.add_argument("--bs", type=int, default=32)
p.add_argument("--restate", type=float, default=0.6)
p.add_argument("--save")
p.add_argument("--hidden", type=int, default=64)
p.add_argument("--pack", type=int, default=0)
p.add_argument("--cosine", type=int, default=1)
p.add_argument("--layers", type=int, default=2)
a = p.parse_args()
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from grpo_sweep.data.arithmetic import arithmetic_splits
from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model
from grpo_sweep.rewards import REWARDS
torch.set_num_threads(1)
SYSTEM = "Respond in the following format:\n<think>\n...\n</think>\n<answer>\n...\n</answer>"
INTROS = ("Take", "Consider", "Now", "Look at", "Here is", "Next:", "Then")
FILLERS = ("", " Well,", " So", " Ok.", "\n", " Let us see.\n", " Hmm.")
base = ensure_tiny_model(TinySpec(hidden_size=a.hidden, intermediate_size=2*a.hidden, num_hidden_layers=a.layers))
tok = AutoTokenizer.from_pretrained(base); tok.padding_side = "right"
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
rng = random.Random(0)
ev = lambda x, op, y: x + y if op == "+" else x - y if op == "-" else x * y
table = [(f"{x} {op} {y}", ev(x, op, y)) for x in range(1, 10) for op in "+-*" for y in range(1, 10)]
train, held = arithmetic_splits(179, 64, 2, 2, 9, 0)
def parse(q):
    e = q[len("What is the result of "):-1]; x, op, y = e.split(); return int(x), op, int(y)
def chat(q):
    x, op, y = parse(q)
    if rng.random() < a.p_add: op = "+"
    v = ev(x, op, y)
    m = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q},
         {"role": "assistant", "content": f"<think>\n{x} {op} {y} = {v}\n</think>\n<answer>\n{v}\n</answer>"}]
    return tok.apply_chat_template(m, tokenize=False)
def facts():
    if a.pack:
        return ' '.join(f'{e} = {v}.' for e, v in (rng.choice(table) for _ in range(a.pack)))
    e, v = rng.choice(table)
    if rng.random() < a.restate:
        return f"{rng.choice(INTROS)} {e}{rng.choice('.?!:')}{rng.choice(FILLERS)} {e} = {v}."
    others = [rng.choice(table) for _ in range(rng.randint(0, 3))]
    return " ".join(f"{e2} = {v2}." for e2, v2 in others + [(e, v)])
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5*(1+__import__('math').cos(__import__('math').pi*i/a.steps)) if a.cosine else 1.0)
torch.manual_seed(0); t0 = time.perf_counter(); model.train()
for _ in range(a.steps):
    c = rng.random() < a.chat
    b = tok([chat(rng.choice(train)["question"]) if c else facts() for _ in range(a.bs)], return_tensors="pt", padding=True, add_special_tokens=False)
    labels = b["input_ids"].masked_fill(b["attention_mask"] == 0, -100)
    model(**b, labels=labels).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); opt.zero_grad(); sched.step()
tr = time.perf_counter() - t0
model.eval(); tok.padding_side = "left"
def evalset(rows):
    prompts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": r["question"]}], tokenize=False, add_generation_prompt=True) for r in rows]
    def gen(n, s):
        b = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            o = model.generate(**b, max_new_tokens=32, do_sample=s, temperature=1.0, num_return_sequences=n)
        t = tok.batch_decode(o[:, b["input_ids"].shape[1]:], skip_special_tokens=True)
        return t, REWARDS["correct"](completions=t, ground_truth=[r["ground_truth"] for r in rows for _ in range(n)])
    g, r = gen(1, False); _, s = gen(8, True)
    # oracle: does model know the fact when it copies the op? check think line
    return {"greedy": round(sum(r)/len(r),3), "format": sum(REWARDS["format"](completions=g))/len(g), "sample": round(sum(s)/len(s),3),
            "pass8": sum(max(s[i*8:(i+1)*8]) for i in range(len(rows)))/len(rows), "ex": g[:2]}
# plain fact recall on held-out
def recall(rows):
    ok = 0
    for r in rows:
        x, op, y = parse(r["question"]); b = tok([f"{x} {op} {y} ="], return_tensors="pt", add_special_tokens=False)
        with torch.no_grad(): o = model.generate(**b, max_new_tokens=4, do_sample=False)
        ok += tok.decode(o[0, b["input_ids"].shape[1]:]).strip().split(".")[0].strip() == r["ground_truth"]
    return ok / len(rows)
res = {"args": vars(a), "train_s": round(tr, 1), "held": evalset(held), "train": evalset(train[:64]), "recall_held": recall(held)}
print(json.dumps(res))
if a.save: model.save_pretrained(a.save); tok.save_pretrained(a.save)
