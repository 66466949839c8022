"""The generator's prompt (design.md section 3: the search-and-learn system prompt)."""

SYSTEM_PROMPT = (
    "Solve the following math problem efficiently and clearly:\n\n- For simple problems (2 steps "
    "or fewer):\nProvide a concise solution with minimal explanation.\n\n- For complex problems (3 "
    "steps or more):\nUse this step-by-step format:\n\n## Step 1: [Concise description]\n[Brief "
    "explanation and calculations]\n\n## Step 2: [Concise description]\n[Brief explanation and "
    "calculations]\n\n...\n\nRegardless of the approach, always conclude with:\n\nTherefore, the "
    "final answer is: $\\boxed{answer}$. I hope it is correct.\n\nWhere [answer] is just the final "
    "number or expression that solves the problem."
)


# A problem (the user's text) or a step (the model's) is never the template's: in a rendered prompt
# it sits between these marks, and a backend tokenizes what they enclose with no control tokens, so
# a problem or a step that contains "<|im_end|>" cannot end its turn. Private-use characters: no
# problem or template holds them (literal() drops any that a text brings).
LITERAL_START, LITERAL_END = "\ue000", "\ue001"


def literal(text: str) -> str:
    """`text` marked as the user's or the model's own, never the template's (see LITERAL_START)."""
    return LITERAL_START + unmark(text) + LITERAL_END


def unmark(text: str) -> str:
    """`text` without the marks: the text as the model reads it."""
    return text.replace(LITERAL_START, "").replace(LITERAL_END, "")


def literal_spans(text: str) -> list[tuple[str, bool]]:
    """`text` cut at the marks: (piece, is_literal) in order, the marks gone, empty pieces
    dropped."""
    spans: list[tuple[str, bool]] = []
    for i, chunk in enumerate(text.split(LITERAL_START)):
        inside, _, after = chunk.partition(LITERAL_END) if i else ("", "", chunk)
        spans += [(piece, lit) for piece, lit in ((inside, True), (after, False)) if piece]
    return spans


def solve_messages(problem: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": literal(problem.strip())},
    ]
