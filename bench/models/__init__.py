"""Models: the registry (``--model`` text → ``ModelSpec``; built-ins in ``models.toml``, users' models files),
the encoder (``ModelSpec`` → ``Encoder``) and its poolers, encoders wrapped around Python objects or SentEval
batchers, the Hub check, and the distance between two models' weights. No torch at import."""
