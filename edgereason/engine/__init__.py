"""The engine (design.md section 4): one loop (loop.py) serves every running request, schedule ->
run -> postprocess, and drives the parts only it uses: the scheduler, the generator's KV sequences
(kv_sequences), the tree grown from a pass's draws (tree_growth), the PRM queue (verification),
selection and pruning (selector; its pure ranking rules in ranking.py), and the request, tree events
and result records. It knows the two model protocols, never a concrete backend."""
