// placeholder: the tokenizer work replaces this file
