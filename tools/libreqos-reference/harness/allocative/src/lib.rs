use proc_macro::TokenStream;
#[proc_macro_derive(Allocative, attributes(allocative))]
pub fn derive(_: TokenStream) -> TokenStream { TokenStream::new() }
