"""`edgereason chat`: a Textual UI that shows the PRM-guided search live."""
