"""The commit protocol: an instant begun, files written under markers, the commit completed or rolled back."""
