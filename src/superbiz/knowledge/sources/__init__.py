"""Where documents come from and the verbs that change them: uploads, folders, Git
repositories, and the list of sources."""
