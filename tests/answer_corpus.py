r"""Answer blocks as small instruct models write them, with their truth and the score each must earn.

Written after the way Qwen2.5-0.5B/1.5B-Instruct and Llama-3.2-1B-Instruct answer GSM8K and MATH prompts (markdown
bold, LaTeX inline and display, `\boxed{}`, units, currency, percent, thousands separators, `Answer:`-style prefixes,
parenthesised remarks, fractions, decimals, negatives, symbolic answers), plus rows taken from Math-Verify's own
tests (huggingface/Math-Verify at 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a, tests/test_all.py; `source` names the
test and index), the table of issue 23 §1, and issue 32's two classes, each in many forms, right and wrong: a
currency amount that ends a plain sentence (`The total is $18.`) and a number restated in words in parentheses
(`18 (eighteen)`, `eighteen (18)`; `18 (twenty)` names another value). Right rows (`correct` 1) and wrong ones (0:
an off-by-one value, a wrong magnitude, two values, a hedge, a list, an operation left to do) are about half and half.

Each row: (form, answer, truth, correct, boxed, source).
- ``answer`` is what the model puts inside ``<answer>…</answer>``; `tests/test_answer_corpus.py` scores it with
  ``correct`` alone and after a ``<think>`` block.
- ``boxed`` is the score the ``boxed`` reward must give the same text written the way a boxed-answer model writes
  it (a line of reasoning, then the text, no tags). It is given only for rows whose answer holds a ``\boxed{}``
  (None otherwise: with no box, ``boxed`` must score 0). It differs from ``correct`` only where ``boxed`` by design
  reads the box and not the words around it (`note` in the source column says so).
- ``source``: "model" (written as the models write), "issue 23" (the issue's table), "issue 31"/"issue 32" (the
  forms those issues reported), or the peer test.
"""

from __future__ import annotations

import re

MV = "Math-Verify tests/test_all.py::"

ROWS: list[tuple[str, str, str, int, int | None, str]] = [
    # --- the table of issue 23 §1: each pays
    ("bold", "**72**", "72", 1, None, "issue 23"),
    ("sentence-math", "The answer is $72$.", "72", 1, None, "issue 23"),
    ("prefix-math", "Answer $ 9 $", "9", 1, None, "issue 23"),
    ("thousands", "is $32,\\!349$", "32349", 1, None, "issue 23"),
    (
        "boxed-in-sentence",
        "Therefore $\\boxed{\\frac94\\pi}$.",
        "\\frac{9}{4}\\pi",
        1,
        1,
        "issue 23; " + MV + "test_latex_notation_math[28]",
    ),
    (
        "boxed-in-sentence",
        "The answer is $\\boxed{\\sqrt 2+\\sqrt 5}$",
        "\\sqrt{2}+\\sqrt{5}",
        1,
        1,
        "issue 23; " + MV + "test_latex_notation_math[27]",
    ),
    ("percent", "$\\boxed{28}$ pct", "28\\%", 1, 1, "issue 23; " + MV + "test_percent_notation[5]"),
    ("sentence", "The answer is 72.", "72", 1, None, "issue 23"),
    ("unit-word", "72 apples", "72", 1, None, "issue 23"),
    ("prefix", "Final answer: 72", "72", 1, None, "issue 23"),
    # --- plain values and sentences (GSM8K style), right
    ("plain", "18", "18", 1, None, "model"),
    ("plain", "  18\n", "18", 1, None, "model"),
    ("sentence", "Janet makes 18 dollars every day at the farmers' market.", "18", 1, None, "model"),
    ("sentence", "So, the total number of eggs is 16.", "16", 1, None, "model"),
    ("sentence", "Therefore, James runs 540 meters a week.", "540", 1, None, "model"),
    ("sentence", "It takes 3 bolts in total.", "3", 1, None, "model"),
    ("prefix", "Answer: 70000", "70000", 1, None, "model"),
    ("prefix", "Final Answer: 624", "624", 1, None, "model"),
    ("prefix", "The final answer is 35.", "35", 1, None, "model"),
    ("prefix", "So the answer is: 20", "20", 1, None, "model"),
    ("prefix", "Answer:64", "64", 1, None, "model"),
    ("gsm8k-marker", "#### 72", "72", 1, None, "model"),
    ("boxed-in-sentence", "The final answer is: $\\boxed{18}$", "18", 1, 1, "model"),
    ("boxed-in-sentence", "The final answer is \\(\\boxed{18}\\).", "18", 1, 1, "model"),
    # --- markdown, right
    ("bold", "**18**", "18", 1, None, "model"),
    ("bold", "The answer is **260**.", "260", 1, None, "model"),
    ("bold", "**Answer:** 366", "366", 1, None, "model"),
    ("bold", "**Final Answer:** $\\frac{3}{4}$", "\\frac{3}{4}", 1, None, "model"),
    ("bold", "__57__", "57", 1, None, "model"),
    ("bold", "*48*", "48", 1, None, "model"),
    ("code", "`125`", "125", 1, None, "model"),
    ("heading", "### Final Answer\n\n694", "694", 1, None, "model"),
    ("heading", "## Answer\n**13**", "13", 1, None, "model"),
    # --- LaTeX inline / display, right
    ("latex-inline", "$460$", "460", 1, None, "model"),
    ("latex-inline", "\\(5\\)", "5", 1, None, "model"),
    ("latex-display", "\\[ 42 \\]", "42", 1, None, "model"),
    ("latex-display", "$$\n\\frac{1}{6}\n$$", "\\frac{1}{6}", 1, None, "model"),
    ("sentence-math", "Thus, the value of $x$ is $5$.", "5", 1, None, "model"),
    ("sentence-math", "The probability is $\\dfrac{2}{9}$.", "\\frac{2}{9}", 1, None, "model"),
    ("equation", "$x = 12$", "12", 1, None, "model"),
    ("equation", "x = -3", "-3", 1, None, "model"),
    ("equation", "So $n = \\frac{24}{2} = 12$.", "12", 1, None, "model"),
    # --- \boxed{} inside the answer, right
    ("boxed", "\\boxed{204}", "204", 1, 1, "model"),
    ("boxed", "$\\boxed{10}$", "10", 1, 1, "model"),
    ("boxed-in-sentence", "The final answer is $\\boxed{7}$.", "7", 1, 1, "model"),
    (
        "boxed-in-sentence",
        "Therefore, the final answer is: $\\boxed{1.5}$. I hope it is correct.",
        "1.5",
        1,
        1,
        "model",
    ),
    ("boxed-display", "\\[\n\\boxed{3\\sqrt{13}}\n\\]", "3\\sqrt{13}", 1, 1, "model"),
    ("boxed-in-sentence", "So there are $\\boxed{2}$ distinct possible values for $B$.", "2", 1, 1, "model"),
    ("boxed-units", "$\\boxed{15 \\text{ cm}}$", "15", 1, 1, "model"),
    ("boxed-twice", "The answer is $\\boxed{8}$.\n\n$$\\boxed{8}$$", "8", 1, 1, "model"),
    # --- units, right
    ("unit-word", "15 cm", "15", 1, None, "model"),
    ("unit-word", "3 hours.", "3", 1, None, "model"),
    ("unit-word", "48 km/h", "48", 1, None, "model"),
    ("unit-latex", "$5\\text{ meters}$", "5", 1, None, "model"),
    ("unit-latex", "$12\\,\\text{cm}^2$", "12", 1, None, "model"),
    ("unit-power", "36 cm^2", "36", 1, None, "model"),
    ("degrees", "$90^\\circ$", "90", 1, None, "model"),
    ("degrees", "The angle measures 45°.", "45", 1, None, "model"),
    # --- currency, right
    ("currency", "$18", "18", 1, None, "model"),
    ("currency", "\\$18", "18", 1, None, "model"),
    ("currency", "She earns $18 per day.", "18", 1, None, "model"),
    ("currency", "USD 18", "18", 1, None, "model"),
    ("currency", "She earns $18 a day.", "18", 1, None, "model"),
    ("currency", "18 dollars", "18", 1, None, "model"),
    ("currency", "€18", "18", 1, None, "model"),
    ("currency", "$\\$16.20$", "16.2", 1, None, "model"),
    ("currency", "The total cost is \\$1,250.", "1250", 1, None, "model"),
    ("currency", "**$35.00**", "35", 1, None, "model"),
    # --- percent, right
    ("percent", "28%", "28", 1, None, "model"),
    ("percent", "$40\\%$", "40", 1, None, "model"),
    ("percent", "25 percent", "25", 1, None, "model"),
    ("percent", "28 pct", "28\\%", 1, None, MV + "test_percent_notation[1]"),
    ("percent", "$28$ percent", "28\\%", 1, None, MV + "test_percent_notation[4]"),
    # --- thousands separators, right
    ("thousands", "32,349", "32349", 1, None, "model"),
    ("thousands", "$32{,}349$", "32349", 1, None, "model"),
    ("thousands", "The population is 1,250,000 people.", "1250000", 1, None, "model"),
    ("thousands", "7,425,000", "7425000", 1, None, MV + "test_number_extraction[1]"),
    # --- parenthesised remarks of words, right
    ("remark", "72 (the total number of apples)", "72", 1, None, "model"),
    ("remark", "$18 (per day)", "18", 1, None, "model"),
    ("remark", "**5** (hours)", "5", 1, None, "model"),
    # --- fractions, decimals, negatives, right
    ("fraction", "3/4", "\\frac{3}{4}", 1, None, "model"),
    ("fraction", "$\\frac{7}{2}$", "3.5", 1, None, "model"),
    ("decimal", "0.75", "\\frac{3}{4}", 1, None, "model"),
    ("decimal", "The answer is 2.5.", "2.5", 1, None, "model"),
    ("negative", "-5", "-5", 1, None, "model"),
    ("negative", "$-\\frac{1}{2}$", "-\\frac{1}{2}", 1, None, "model"),
    ("negative", "The answer is \u22127.", "-7", 1, None, "model"),
    # --- symbolic MATH answers, right
    ("symbolic", "$3\\sqrt{13}$", "3\\sqrt{13}", 1, None, "model"),
    ("symbolic", "$\\left( 3, \\frac{\\pi}{2} \\right)$", "(3, \\frac{\\pi}{2})", 1, None, "model"),
    ("symbolic", "The solution set is $[-4, 0]$.", "[-4,0]", 1, None, "model"),
    ("symbolic", "$y = 2x + 1$", "y = 2x + 1", 1, None, "model"),
    ("symbolic", "$2 \\sin b \\cos a$", "2 \\sin b \\cos a", 1, None, "model"),
    ("symbolic", "$\\boxed{1 \\pm \\sqrt{19}}$", "1 \\pm \\sqrt{19}", 1, 1, MV + "test_latex_notation_math[19]"),
    ("symbolic", "$\\frac{1}{3} \\text{meters}$", "1/3", 1, None, MV + "test_latex_notation[19]"),
    ("symbolic", "$k = \\frac{1}{3}$", "1/3", 1, None, MV + "test_latex_notation[21]"),
    (
        "symbolic",
        "$\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}$",
        "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}",
        1,
        None,
        "model",
    ),
    ("symbolic", "The answer is $2\\pi$.", "2\\pi", 1, None, "model"),
    ("words", "**Evelyn**", "Evelyn", 1, None, "model"),
    ("words", "$\\text{Tuesday}$.", "Tuesday", 1, None, "model"),
    # --- a currency amount ending a plain sentence (issue 32), right
    ("currency-sentence", "The total is $18.", "18", 1, None, "issue 32"),
    ("currency-sentence", "So she pays $18.50.", "18.5", 1, None, "issue 32"),
    ("currency-sentence", "$1,234.", "1234", 1, None, "issue 32"),
    ("currency-sentence", "That costs 18 dollars.", "18", 1, None, "issue 32"),
    ("currency-sentence", "It is €18.", "18", 1, None, "issue 32"),
    ("currency-sentence", "$18.00.", "18", 1, None, "issue 32"),
    ("currency-sentence", "The answer is $18.", "18", 1, None, "issue 32"),
    ("currency-sentence", "Total: $18.", "18", 1, None, "model"),
    ("currency-sentence", "It costs $0.50.", "0.5", 1, None, "model"),
    ("currency-sentence", "It costs $.50.", "0.5", 1, None, "model"),
    ("currency-sentence", "The price is US$18.", "18", 1, None, "model"),
    ("currency-sentence", "The change in her balance is -$5.", "-5", 1, None, "model"),
    ("currency-sentence", "Each ticket costs £7.25.", "7.25", 1, None, "model"),
    ("currency-sentence", "**The total is $18.**", "18", 1, None, "model"),
    ("currency-sentence", "She earns $18!", "18", 1, None, "model"),
    ("currency-sentence", "The total cost is $1,250.00.", "1250", 1, None, "model"),
    ("currency-sentence", "So, Janet makes $18, every day.", "18", 1, None, "model"),
    # --- a number restated in words in parentheses (issue 32), right: the words name the same value
    ("restated-words", "18 (eighteen)", "18", 1, None, "issue 32"),
    ("restated-words", "18 (eighteen).", "18", 1, None, "issue 32"),
    ("restated-words", "The answer is 18 (eighteen).", "18", 1, None, "issue 32"),
    ("restated-words", "eighteen (18)", "18", 1, None, "issue 32"),
    ("restated-words", "72 (seventy-two)", "72", 1, None, "model"),
    ("restated-words", "1,250 (one thousand two hundred fifty)", "1250", 1, None, "model"),
    ("restated-words", "She pays $18 (eighteen dollars).", "18", 1, None, "model"),
    ("restated-words", "**5** (five)", "5", 1, None, "model"),
    ("restated-words", "The answer is 105 (one hundred and five).", "105", 1, None, "model"),
    ("restated-words", "Seventy-Two (72)", "72", 1, None, "model"),
    ("restated-words", "-5 (minus five)", "-5", 1, None, "model"),
    ("restated-words", "$\\boxed{3}$ (three)", "3", 1, 1, "model"),
    ("restated-words", "The answer is $40$ (forty).", "40", 1, None, "model"),
    # --- a number in words alone is the value it names, right
    ("number-word", "The answer is eighteen.", "18", 1, None, "model"),
    ("number-word", "seventy-two apples", "72", 1, None, "model"),
    ("number-word", "negative five", "-5", 1, None, "model"),
    # --- a run of punctuation after a remark (issue 31's pinned miss), right
    ("remark", "72 (the total)..", "72", 1, None, "issue 31"),
    ("remark", "Therefore The answer is 72 (the total)..", "72", 1, None, "issue 31"),
    ("remark", "72 (the total)?!", "72", 1, None, "model"),
    ("remark", "The answer is 72 (the number of apples)!!", "72", 1, None, "model"),
    # ===== wrong: each must earn 0
    # --- a wrong value, however well written
    ("bold", "**73**", "72", 0, None, "model"),
    ("sentence-math", "The answer is $71$.", "72", 0, None, "model"),
    ("sentence", "Janet makes 16 dollars every day.", "18", 0, None, "model"),
    ("prefix", "Final Answer: 623", "624", 0, None, "model"),
    ("boxed-in-sentence", "The final answer is $\\boxed{6}$.", "7", 0, 0, "model"),
    ("thousands", "$32,\\!348$", "32349", 0, None, "model"),
    ("currency", "$17", "18", 0, None, "model"),
    ("percent", "27%", "28", 0, None, "model"),
    ("negative", "5", "-5", 0, None, "model"),
    ("negative", "The answer is $7$.", "-7", 0, None, "model"),
    ("fraction", "$\\frac{4}{3}$", "\\frac{3}{4}", 0, None, "model"),
    ("symbolic", "$\\sqrt{13}$", "3\\sqrt{13}", 0, None, "model"),
    ("symbolic", "$\\sqrt{2}$", "\\sqrt{2}+\\sqrt{5}", 0, None, "model"),
    ("symbolic", "$(3, \\pi)$", "(3, \\frac{\\pi}{2})", 0, None, "model"),
    ("symbolic", "$y = 2x - 1$", "y = 2x + 1", 0, None, "model"),
    ("degrees", "$45^\\circ$", "90", 0, None, "model"),
    ("remark", "73 (the total number of apples)", "72", 0, None, "model"),
    ("currency", "**$17**", "18", 0, None, "model"),
    ("currency", "USD 19", "18", 0, None, "model"),
    ("boxed-in-sentence", "The answer is $\\boxed{19}$.", "18", 0, 0, "model"),
    ("prefix", "Answer: 541", "540", 0, None, "model"),
    ("sentence", "So, the total number of eggs is 15.", "16", 0, None, "model"),
    ("gsm8k-marker", "#### 71", "72", 0, None, "model"),
    ("boxed-in-sentence", "The final answer is \\(\\boxed{17}\\).", "18", 0, 0, "model"),
    ("bold", "**Answer:** 365", "366", 0, None, "model"),
    ("heading", "### Final Answer\n\n695", "694", 0, None, "model"),
    ("code", "`124`", "125", 0, None, "model"),
    ("latex-inline", "\\(4\\)", "5", 0, None, "model"),
    ("equation", "$x = 13$", "12", 0, None, "model"),
    ("equation", "x = 3", "-3", 0, None, "model"),
    ("fraction", "$\\frac{2}{3}$", "\\frac{3}{4}", 0, None, "model"),
    ("decimal", "0.7", "\\frac{3}{4}", 0, None, "model"),
    ("negative", "$\\frac{1}{2}$", "-\\frac{1}{2}", 0, None, "model"),
    ("sentence-math", "The probability is $\\dfrac{1}{9}$.", "\\frac{2}{9}", 0, None, "model"),
    ("symbolic", "$3\\sqrt{3}$", "3\\sqrt{13}", 0, None, "model"),
    ("symbolic", "The solution set is $[-4, 1]$.", "[-4,0]", 0, None, "model"),
    ("symbolic", "$2\\pi r$", "2\\pi", 0, None, "model"),
    ("symbolic", "The answer is $\\frac{9}{4}$.", "\\frac{9}{4}\\pi", 0, None, "model"),
    ("boxed-units", "$\\boxed{90^\\circ}$", "45", 0, 0, "model"),
    ("unit-latex", "$12\\,\\text{cm}^2$", "24", 0, None, "model"),
    ("thousands", "$1,\\!250$", "1205", 0, None, "model"),
    ("percent", "40 percent", "45", 0, None, "model"),
    ("words", "**Evenly**", "Evelyn", 0, None, "model"),
    ("words", "42", "forty two", 0, None, "model"),
    # --- the leading number of a symbolic answer
    ("symbolic", "The answer is 3.", "3\\sqrt{13}", 0, None, "model"),
    ("boxed-in-sentence", "So the answer is $\\boxed{2}$.", "2\\pi", 0, 0, "model"),
    # --- a wrong magnitude (units not converted)
    ("unit-word", "7200 cents", "72", 0, None, "model"),
    ("unit-word", "0.5 hours", "30", 0, None, "model"),
    ("unit-word", "1.5 km", "1500", 0, None, "model"),
    ("thousands", "32.349", "32349", 0, None, "model"),
    ("unit-word", "1.8 dollars", "18", 0, None, "model"),
    ("thousands", "72,000", "72", 0, None, "model"),
    ("decimal", "7.2", "72", 0, None, "model"),
    ("percent", "0.28%", "28", 0, None, "model"),
    (
        "number-word",
        "12 thousand",
        "12000",
        0,
        None,
        "model; digits and a scale word are two numbers (a second value, as in `72 in three days`)",
    ),
    ("decimal", "0.28", "28", 0, None, "model"),
    # --- two values
    ("two-values", "72 or 73", "72", 0, None, "model"),
    ("two-values", "$11$ and $12$", "12", 0, None, "model"),
    ("two-values", "72 (or 73)", "72", 0, None, "model"),
    ("two-values", "The answer is 72, not 73.", "72", 0, None, "model"),
    ("two-values", "is 72 not 27", "72", 0, None, "model"),
    ("two-values", "**72** or **73**", "72", 0, None, "model"),
    ("two-values", "$72$ apples and $3$ oranges", "72", 0, None, "model"),
    ("two-values", "$18 and $20", "18", 0, None, "model"),
    ("two-values", "\\boxed{72} \\boxed{73}", "72", 0, 0, "model"),
    ("two-values", "72\n\n73", "72", 0, None, "model"),
    ("two-values", "72 in three days", "72", 0, None, "model"),
    ("two-values", "The answer is 18, not $\\boxed{20}$.", "18", 0, 0, "model"),
    # --- a check or working beside the answer (a second statement: see docs/rewards.md)
    ("working", "72 (8 × 9)", "72", 0, None, "model"),
    ("working", "72 (since 8 × 9 = 72)", "72", 0, None, "model"),
    ("working", "16 - 3 - 4 = 9 eggs, so 9 * 2 = 18 dollars", "18", 0, None, "model"),
    ("working", "$8 \\times 9 = 72$, so the answer is $72$.", "72", 0, None, "model"),
    # --- the box holds the answer, the words around it add a second value: `boxed` reads the box alone
    ("two-values", "$\\boxed{72}$ (not 73)", "72", 0, 1, "model; boxed reads only the box"),
    # --- hedges
    ("hedge", "approximately 72", "72", 0, None, "model"),
    ("hedge", "about 72 apples", "72", 0, None, "model"),
    ("hedge", "at least 72", "72", 0, None, "model"),
    ("hedge", "72 or so", "72", 0, None, "model"),
    ("hedge", "I think it's around 72.", "72", 0, None, "model"),
    ("hedge", "**Maybe 72**", "72", 0, None, "model"),
    ("hedge", "72 (rounded to the nearest whole number)", "72", 0, None, "model"),
    ("hedge", "$\\approx 72$", "72", 0, None, "model"),
    ("hedge", "more than 72", "72", 0, None, "model"),
    ("hedge", "The answer is not 72.", "72", 0, None, "model"),
    ("hedge", "between 70 and 75", "72", 0, None, "model"),
    ("hedge", "72–75", "72", 0, None, "model"),
    ("hedge", "18 (but 20 if she sells the duck eggs too)", "18", 0, None, "model"),
    ("list", "$(3, \\frac{\\pi}{2}), (3, \\pi)$", "(3, \\frac{\\pi}{2})", 0, None, "model"),
    # --- lists, operations left to do, repeats
    ("list", "12, 13, 14", "12", 0, None, "model"),
    ("list", "- 71\n- 72\n- 73", "72", 0, None, "model"),
    ("operation", "$8 \\times 9$", "72", 0, None, "model"),
    ("operation", "8 * 9", "72", 0, None, "model"),
    ("operation", "\\boxed{20 - 8}", "12", 0, 0, "model"),
    ("repeat", "72 72 72", "72", 0, None, "model"),
    ("repeat", "1 000", "1000", 0, None, MV + "test_number_extraction[2] (a space is no thousands separator)"),
    # --- a currency amount ending a sentence: a wrong amount, another amount, a decimal point that is not the period
    ("currency-sentence", "The total is $17.", "18", 0, None, "model"),
    ("currency-sentence", "So she pays $18.05.", "18.5", 0, None, "model"),
    ("currency-sentence", "$1,243.", "1234", 0, None, "model"),
    ("currency-sentence", "It costs $18.", "1.8", 0, None, "model"),
    ("currency-sentence", "It costs $1,800.", "18", 0, None, "model"),
    ("currency-sentence", "It costs $18.50.", "18", 0, None, "model"),
    ("currency-sentence", "The total is $18, and the tax is $2.", "18", 0, None, "model"),
    ("currency-sentence", "It was $18. Then it was $20.", "18", 0, None, "model"),
    ("currency-sentence", "The change in her balance is -$5.", "5", 0, None, "model"),
    ("currency-sentence", "It is $18 and 50 cents.", "18", 0, None, "model"),
    ("currency-sentence", "The price is US$19.", "18", 0, None, "model"),
    ("currency-sentence", "It is €81.", "18", 0, None, "model"),
    # --- a number restated in parentheses as ANOTHER number, or offered as an alternative
    ("restated-words", "18 (or 20)", "18", 0, None, "issue 32"),
    ("restated-words", "18 (not 20)", "18", 0, None, "issue 32"),
    ("restated-words", "18 (twenty)", "18", 0, None, "model"),
    ("restated-words", "19 (nineteen)", "18", 0, None, "model"),
    ("restated-words", "eighteen (81)", "18", 0, None, "model"),
    ("restated-words", "72 (seventy-three)", "72", 0, None, "model"),
    ("restated-words", "She pays $18 (twenty dollars).", "18", 0, None, "model"),
    ("restated-words", "18 (one eight)", "18", 0, None, "model; no one number in words"),
    ("restated-words", "18 (eighteen) or 20", "18", 0, None, "model"),
    ("restated-words", "eighty (18)", "18", 0, None, "model"),
    ("restated-words", "**5** (fifty)", "5", 0, None, "model"),
    ("restated-words", "$\\boxed{3}$ (thirty)", "3", 0, 1, "model; boxed reads only the box"),
    ("restated-words", "The answer is 105 (one hundred and fifty).", "105", 0, None, "model"),
    # --- a number in words: a wrong value, a sign, a fraction, digits spelled one by one
    ("number-word", "The answer is seventeen.", "18", 0, None, "model"),
    ("number-word", "minus 5", "5", 0, None, "model"),
    ("number-word", "three fourths", "3", 0, None, "model"),
    ("number-word", "one two", "12", 0, None, "model"),
    # --- a remark then a run of punctuation: a wrong value, a second value after it
    ("remark", "73 (the total)..", "72", 0, None, "model"),
    ("remark", "72 (the total).. 73", "72", 0, None, "model"),
    # --- malformed
    ("malformed", "1,000.99$", "1000.99", 0, None, MV + "test_number_extraction[12] (a stray $)"),
    ("malformed", "$$72$", "72", 0, None, "model"),
]


_DOLLAR = re.compile(r"(?<!\\)\$")


def boxed_variant(answer: str) -> str | None:
    """The answer with its one ``$…$`` span boxed, when the words around it hold no digit; else None."""
    if "\\boxed" in answer or len(_DOLLAR.findall(answer)) != 2:
        return None
    before, inside, after = _DOLLAR.split(answer)
    if re.search(r"\d", before + after) or not inside.strip():
        return None
    return f"{before}$\\boxed{{{inside}}}${after}"
