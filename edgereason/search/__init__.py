"""What is searched (design.md section 3): the strategies and their registry, the recipes solve and
chat run by default, and how final answers are graded. Pure rules: they import only config and the
tree."""
