"""edgereason/tree.py: what a tree keeps up to date so an engine step need not walk it (the
frontier, each node's lineage, the count of nodes holding a sequence)."""

from __future__ import annotations

from edgereason.tree import Tree


def test_lineage_is_the_ids_from_the_root():
    tree = Tree()
    a = tree.add_child(tree.root)
    b = tree.add_child(a)
    twin = tree.add_sibling_copy(b)
    assert (a.lineage, b.lineage, twin.lineage) == ((0, 1), (0, 1, 2), (0, 1, 3))


def test_sequence_holders_are_counted_as_sequences_change_hands():
    tree = Tree()
    tree.root.seq = 0
    child = tree.add_child(tree.root)
    child.seq, tree.root.seq = tree.root.seq, None  # the last child takes its parent's over
    twin = tree.add_sibling_copy(child)
    twin.seq = 1
    twin.seq = 2  # a restore hands it another: still one holder
    assert tree.holders.count == 2
    child.seq = None
    assert tree.holders.count == sum(1 for n in tree.nodes.values() if n.seq is not None) == 1


def test_new_nodes_and_touched_ones_join_the_frontier_the_root_never():
    tree = Tree()
    a = tree.add_child(tree.root)
    del tree.frontier[a.id]  # as the scheduler drops a node that cannot run
    tree.touch(tree.root)
    assert tree.frontier == {}
    tree.touch(a)
    b = tree.add_child(a)
    assert list(tree.frontier) == [a.id, b.id]
