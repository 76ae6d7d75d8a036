/* letterbox.cu: placeholder */
