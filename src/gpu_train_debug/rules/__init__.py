"""The diagnoser's rules, by what they read (diagnose.py runs them in this order):

- patterns: failure signatures, each a message shape and the library it comes from, with its fix;
- fallbacks: what the exception chain's structure says when no signature knows the text (the
  exception class, the frame that raised it, argparse usage blocks, pasted one-liners);
- semantics: refusals of a training run's own settings, data and tokenizer, NaN losses, hangs;
- generic: the memory and batch arithmetic of an out-of-memory, for the fix's numbers.
"""
